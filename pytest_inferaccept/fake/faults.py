"""Named faults the fake server can inject: one switch per defect a bundled check exists to catch.

This table is the documentation of what the suites catch: every fault is listed with the
misbehaviour it reproduces, and the project's tests prove a check fails when it is switched on.
"""

from __future__ import annotations

FAULTS: dict[str, str] = {
    # service readiness
    "health_lies": "/health answers 200 while every completion hangs",
    "health_down": "/health answers 503 although completions work",
    "models_missing_served": "/v1/models does not list the served model",
    "wrong_model_field": "responses name model 'gpt-3.5-turbo' instead of the served id",
    "metrics_missing": "/metrics answers 404",
    "metrics_invalid": "/metrics is not valid Prometheus text",
    "metrics_counter_reset": "counters go down between scrapes",
    "metrics_redirect": "/metrics answers 307 to /metrics/, which serves the text (a LiteLLM gateway; "
                        "not a defect: a scraper follows it)",
    "models_shape_bad": "/v1/models entries say object 'engine' and created as a date string",
    "version_missing": "no /version endpoint (the server does not identify itself)",
    "metrics_renamed": "operator metrics renamed: ITL/KV under old vLLM names, TTFT/e2e/queue under "
                       "names no profile knows",
    "metrics_old_names_frozen": "vLLM's renamed metrics are also served under their old names (the "
                                "deprecation window), which stay at 0 while the new names count",
    # chat and streaming conformance
    "answer_in_reasoning": "content null, the answer in reasoning_content (vLLM #17357)",
    "finish_reason_invalid": "finish_reason 'eos_token' instead of 'stop' or 'length' (TGI #2296)",
    "usage_total_wrong": "usage.total_tokens is not prompt + completion",
    "n_wrong_indices": "with n > 1 every choice has index 0 (LiteLLM, streamed n >= 2)",
    "logprobs_mismatch": "logprob tokens do not spell the content",
    "unknown_model_200": "a request for an unknown model is answered 200 by the served model",
    "stream_no_done": "streams end without data: [DONE]",
    "stream_content_type_wrong": "streams are sent as application/json",
    "stream_inconsistent_id": "every chunk of a stream carries a different id",
    "stream_no_role": "the first streamed delta has no role",
    "stream_double_finish": "the finish_reason chunk is sent twice",
    "stream_text_differs": "the streamed text lacks the last token of the non-streamed text",
    "usage_every_chunk": "with include_usage every chunk carries usage (vLLM #7262)",
    "usage_without_asking": "a usage chunk is streamed without include_usage (llama.cpp #16048)",
    "usage_chunk_with_choices": "the include_usage chunk carries the finish choice (LiteLLM #28735)",
    "stream_error_chunk": "after some content the stream sends {error: ...} instead of finishing",
    "stream_cut_most": "three in five streamed chat answers (spread evenly over the requests) stop after "
                       "their third content chunk with an {error: ...} event and data: [DONE]; the "
                       "other two finish normally",
    "empty_under_concurrency": "with two or more chat requests in flight, streamed answers are the role "
                               "chunk and data: [DONE] (no content, no finish_reason) and non-streamed "
                               "ones 200 with content \"\" and finish_reason null; a request alone "
                               "answers normally (each waits 0.1 s first to see who else arrives)",
    "completions_shape_bad": "legacy completions say object 'completion' and omit choices[].index",
    "auth_not_enforced": "the configured API key is not checked",
    # process-level
    "hang_completions": "chat and completions requests never answer (no headers)",
    "stream_stall": "streams send headers and the role chunk, then nothing",
    "stream_drip": "streamed answers arrive one byte every 0.5 s (no read ever times out)",
    "stream_forever": "streams send valid content chunks without end (no finish_reason, no [DONE])",
    "huge_json": "non-streamed chat answers are a 300 MB JSON document",
    "chat_500": "every chat completion answers 500",
    "quality_drop": "a third of the prompts the fake can answer (sums, products, \"repeat exactly\"; "
                    "the same ones each run, by a hash of the prompt) are answered wrongly: a number one "
                    "off, a copy missing its last word (a broken template or kernel)",
    "tokenizer_drops_spaces": "chat answers lose the spaces between words (a tokenizer or detokenizer "
                              "that drops them: \"repeat exactly\" answers come back run together)",
    "logprob_shift": "every chat logprob is 0.05 nats lower (pick and alternatives alike): numerics that "
                     "change no greedy token, as a quantization or kernel change can",
    "near_tie_flip": "where the fake model has a near tie (its second token of a seeded-word answer, "
                     "runner-up 0.2 nats behind), the runner-up wins: texts change, no grade does (batching "
                     "noise; not a regression)",
    # capabilities
    "no_tools": "requests with tools are rejected with 400 (tools unsupported)",
    "tools_500": "requests with tools answer 500 (tools broken)",
    "no_embeddings": "/v1/embeddings answers 404",
    "no_completions": "/v1/completions answers 404",
    "ignore_n": "n > 1 returns a single choice",
    "no_logprobs": "logprobs requests return logprobs: null",
    "no_tokenize": "/tokenize and /apply-template answer 404 (no tokenizer endpoint: skipped)",
    "echo_rejected": "legacy completions with echo: true are rejected with 400 (no echo: skipped)",
    # the endpoints evaluation harnesses use
    "echo_logprobs_generated_only": "completions with echo and logprobs return the prompt text but "
                                    "logprobs for the generated tokens only (llama.cpp #27174: "
                                    "loglikelihood tasks score exactly chance)",
    "double_bos": "the chat prompt gets a second BOS: /apply-template carries the BOS text and the "
                  "tokenizer adds another, /tokenize of a chat shows two leading BOS ids, and "
                  "non-streamed usage.prompt_tokens is one above the correct count",
    "tokenize_without_bos": "/tokenize leaves out the BOS the chat path adds (add_special is ignored, "
                            "chat messages render without it): its count is one below "
                            "usage.prompt_tokens",
    # generation control
    "stop_ignored": "the stop parameter is ignored",
    "stop_included": "the matched stop text is kept at the end of the output",
    "stop_partial_leak_stream": "streams send a prefix of the matched stop text (SGLang #6997)",
    "stop_list_first_only": "only the first entry of a stop list is honoured",
    "stop_multi_token_ignored": "stop strings spanning several tokens are ignored (llama.cpp #11538)",
    "stop_finish_reason_wrong": "a matched stop reports finish_reason 'stop_sequence' (TGI #2296)",
    "max_tokens_ignored": "max_tokens is ignored",
    "max_completion_tokens_ignored": "max_completion_tokens is ignored",
    "length_finish_reason_wrong": "output cut by the token limit reports finish_reason 'stop'",
    "length_usage_miscounted": "output cut by the token limit reports one completion token too many",
    "nondeterministic_temp0": "temperature 0 samples randomly",
    "answers_changed": "about half of the prompts get other (still deterministic) answers and every "
                       "embedding moves a little, as after an upgrade that changed kernels or templates",
    "seed_ignored": "seed is ignored at temperature > 0",
    "temperature_ignored": "every answer is greedy: temperature (and seed) change nothing",
    "default_sampling_changed": "a request without temperature is answered greedily (the default was "
                                "temperature 1)",
    "sampled_frequencies_off": "sampled first tokens are drawn uniformly from the candidates, not with the "
                               "probabilities the logprobs report",
    "batch_variant_greedy": "with more than 2 chat requests in flight, a greedy answer's fourth token is "
                            "another word, absent from the pick's alternatives (a non-tie point: a "
                            "batch-variant kernel that changes answers)",
    "near_tie_batch_variance": "with more than 2 chat requests in flight, a greedy answer flips at the fake "
                               "model's near tie only (runner-up 0.2 nats behind), as batch numerics do: "
                               "not a defect",
    "prefix_cache_changes_output": "a chat prompt whose first 200 characters were seen before (a warm prefix "
                                   "cache) gets another fourth token, absent from the pick's "
                                   "alternatives (a non-tie point)",
    "seed_ignored_under_load": "with more than 2 chat requests in flight, the seed is ignored (the sample "
                               "differs from the same seeded request alone)",
    "greedy_near_tie_jitter": "repeats of one greedy request flip, half the time, at the fake model's near "
                              "tie (and nowhere else), as batch numerics do",
    # embeddings
    "embeddings_indices_wrong": "every embedding in data[] has index 0",
    "embeddings_base64_wrong": "base64 embeddings hold float64 instead of float32",
    "embeddings_base64_rejected": "encoding_format base64 is rejected with 400",
    "dimensions_ignored": "the dimensions parameter is ignored (full-length vectors, 200)",
    "embeddings_nan": "embedding vectors contain NaN",
    "embeddings_dim_varies": "the vector length depends on the input",
    "embeddings_usage_missing": "embedding responses carry no usage",
    # tool calling
    "tool_args_object": "tool-call arguments are a JSON object, not a string (TGI #2461)",
    "tool_args_invalid_json": "tool-call arguments lack their closing brace",
    "tool_args_schema_violation": "tool-call arguments miss the function's required parameters",
    "tool_stream_args_duplicated": "streamed tool-call argument fragments are sent twice (vLLM #10395)",
    "tool_finish_reason_stop": "tool calls finish with 'stop' instead of 'tool_calls' (vLLM PR#25054)",
    "tool_choice_none_ignored": "tool_choice 'none' is treated as 'auto'",
    "tool_required_ignored": "tool_choice 'required' is treated as 'auto'",
    "tool_named_wrong": "a named tool_choice calls another function",
    "tool_named_ignored": "a named tool_choice is treated as 'auto' (llama-server b11434: \"Wrong type "
                          "supplied for parameter 'tool_choice', using default value\")",
    "tools_unprompted_silent": "with tool_choice auto the model answers in text and calls no tool (a small "
                               "model such as SmolLM2-135M; not a server defect: forced choices still call)",
    "no_parallel_tool_calls": "only the first of several tool calls is returned",
    "tool_result_rejected": "a conversation with a tool result is rejected with 400",
    "tool_length_finish_wrong": "a tool call cut by max_tokens reports 'tool_calls' (vLLM #58228)",
    "harmony_in_tool_name": "tool names carry a Harmony channel marker: 'get_weather<|channel|>commentary' "
                            "(vLLM #32587)",
    "agent_followup_empty": "from the second tool result of a conversation on, the answer is empty: content "
                            "\"\", finish_reason stop (empty follow-ups reported on vLLM and SGLang)",
    "stream_tool_index_zero": "streamed parallel tool calls all carry index 0 (Ollama #15457, SGLang #6310)",
    "stream_tool_name_repeated": "every streamed fragment of a tool call repeats its function name (vLLM "
                                 "#14951)",
    "stream_tool_type_missing": "the first streamed fragment of a tool call has no type: 'function'",
    "tool_required_runaway": "with tool_choice 'required' a stream sends tool calls without end, past "
                             "max_tokens (SGLang #13514)",
    # reasoning models (seen with the fake's reasoning_tokens on)
    "think_in_content": "the reasoning is also left in content, as <think>…</think> before the answer",
    "harmony_in_content": "text answers start with the Harmony header <|channel|>final<|message|>",
    "stop_inside_reasoning": "a stop string is matched inside the reasoning: the reasoning is cut there and "
                             "no answer follows (vLLM #14170)",
    "reasoning_length_hidden": "an answer whose reasoning used up max_tokens (empty content) reports "
                               "finish_reason 'stop' instead of 'length' (LiteLLM #21041)",
    "reasoning_kwargs_off_ignored": "chat_template_kwargs.enable_thinking false is ignored: the answer "
                                   "still reasons",
    "reasoning_effort_none_ignored": "reasoning_effort 'none' is ignored: the answer still reasons",
    # structured output
    "json_schema_ignored": "response_format json_schema is ignored (llama.cpp #11988, ollama #10001)",
    "json_object_invalid": "response_format json_object answers plain text",
    "structured_stream_broken": "streamed JSON output repeats its first fragment",
    # robustness: answers to bad input
    "bad_input_500": "out-of-range sampling values (max_tokens, temperature, top_p, n, stop) answer 500",
    "crash_on_bad_request": "the server dies after answering a 4xx (vLLM PR#16529: bad input kills it)",
    "hang_on_long_prompt": "a prompt beyond the context window is never answered",
    "error_shape_flat": 'errors answer {"error": "<string>", "error_type"} (TGI-style, vLLM #12886)',
    "error_plain_text": "a body that is not JSON answers 500 in plain text (SGLang #3805)",
    "accept_invalid_200": "validation errors answer 200 with an empty body (TGI 2.4.0 #2749)",
    "reject_bounds": "top_p at its inclusive bounds 0 and 1 is rejected with 422 (TGI #2222)",
    "silent_truncation": "an over-long prompt is cut to the context window and answered 200 (Ollama #4967)",
    "long_prompt_stream_200": "an over-long streamed prompt answers 200 with an error chunk (SGLang #19996)",
    # the Anthropic Messages API (POST /v1/messages)
    "messages_content_string": "non-streamed messages carry content as a plain string, not a list of blocks",
    "messages_stop_reason_end_turn": "stop_reason is always end_turn and stop_sequence null, also when "
                                     "max_tokens or a stop sequence ended the text",
    "messages_system_ignored": "the top-level system prompt never reaches the model (input_tokens leave "
                               "it out)",
    "messages_stream_no_stop": "streams end after message_delta, without message_stop",
    "messages_stream_delta_repeated": "the first text_delta of a stream is sent twice (the deltas add up "
                                      "to more than the text)",
    "messages_error_openai": 'errors answer the OpenAI envelope {"error": {message, type, param, code}}, '
                             'without "type": "error"',
    "messages_cache_accounting": "usage counts the prompt as a warm prefix cache does: input_tokens 1 and "
                                 "the rest as cache_read_input_tokens (llama-server b11434 after the first "
                                 "request; not a defect: the Messages API counts cache reads apart)",
    "messages_history_dropped": "only the last message of a conversation reaches the model: the earlier user "
                                "and assistant turns are dropped (input_tokens leave them out)",
    "messages_count_tokens_off": "/v1/messages/count_tokens leaves out the system prompt: its input_tokens "
                                 "is below the message's input size for the same request",
    "messages_tool_result_rejected": "a user turn holding a tool_result block is refused with 400",
    "messages_tool_use_end_turn": "a reply holding a tool_use block says stop_reason end_turn, not tool_use",
    "messages_missing_500": "a body without messages answers 500 in the OpenAI envelope (llama-server "
                            "b11434)",
    "messages_lenient": "a request without max_tokens is answered (64 tokens filled in) and temperature "
                        "above 1 is sampled as given, both with 200 (llama-server b11434)",
    "messages_thinking_unsigned": "thinking blocks carry no signature (no signature field; streamed, no "
                                  "signature_delta)",
    # the Responses API (POST /v1/responses)
    "responses_object_wrong": "responses carry no object field (object 'response' missing)",
    "responses_usage_missing": "responses carry no usage",
    "responses_instructions_ignored": "instructions never reach the model (its input tokens leave them out)",
    "responses_call_args_invalid": "function_call arguments lack their closing brace",
    "responses_call_id_missing": "function_call items carry no call_id",
    "responses_tool_output_rejected": "an input with a function_call_output item is rejected with 400",
    "responses_format_ignored": "text.format (json_schema and json_object) is ignored: plain text with "
                                "status completed (llama-server b11434 reads no text.format)",
    "responses_input_tokens_off": "/v1/responses/input_tokens leaves out the instructions: its count is "
                                  "below the response's usage.input_tokens for the same request",
    "responses_max_output_ignored": "max_output_tokens is ignored: status completed with more tokens",
    "responses_cut_reported_completed": "output cut by max_output_tokens reports status completed and no "
                                        "incomplete_details (llama-server b11434 always says completed)",
    "responses_previous_ignored": "previous_response_id is ignored: no earlier turn in the prompt, and an "
                                  "unknown id is answered 200",
    "responses_store_unsupported": "responses are not stored: store answers false and previous_response_id "
                                   "is refused with 400 (a server without state; not a defect: skipped)",
    "responses_stream_out_of_order": "streams send response.in_progress before response.created",
    "responses_stream_sequence_gap": "stream sequence_number skips a value after the third event",
    "responses_stream_no_indices": "stream events carry no sequence_number, output_index or content_index "
                                   "(items are named by item_id only; llama-server b11434)",
    "responses_stream_deltas_differ": "the first response.output_text.delta is never sent (the deltas do "
                                      "not add up to the done text)",
    "responses_stream_two_terminals": "streams send response.completed twice",
    "responses_stream_no_terminal": "streams end after the last output_item.done, without a terminal event",
    "responses_stream_call_args_no_done": "streamed function calls send their argument deltas but no "
                                          "response.function_call_arguments.done (llama-server b11434)",
    "responses_stream_error_bare": "an error after a stream began (an input ending in an assistant message "
                                   "that opens a malformed <tool_call>) is a bare data: {\"error\": {...}} "
                                   "line, no event: line and no type (llama-server b11434)",
    "responses_stream_done_sentinel": "streams end with data: [DONE] after the terminal event (as Chat "
                                      "Completions do; the official SDK stops there: a warning)",
}


def validate_faults(names: object) -> frozenset[str]:
    """Return the fault names as a frozenset; raise ValueError naming the known faults."""
    if isinstance(names, str):
        names = [n for n in names.replace(",", " ").split() if n]
    if not isinstance(names, (list, tuple, set, frozenset)):
        raise ValueError(f"faults must be a list of names, got {names!r}")
    unknown = sorted(str(n) for n in names if n not in FAULTS)
    if unknown:
        raise ValueError(f"unknown fault(s) {', '.join(unknown)}; known: {', '.join(FAULTS)}")
    return frozenset(str(n) for n in names)
