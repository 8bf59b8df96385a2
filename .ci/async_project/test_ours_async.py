"""A team's async acceptance test; .ci/run runs it in a venv holding only the wheel."""

import pytest


@pytest.mark.asyncio
async def test_our_async_chat_and_load(async_openai_client, model, loadgen):
    answer = await async_openai_client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "hello"}], max_tokens=4)
    assert answer.choices[0].message.content
    result = await loadgen.arun(concurrency=2, requests=8)
    assert result.summary.counts.measured == 8
