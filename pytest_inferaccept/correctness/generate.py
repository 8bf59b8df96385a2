"""Regenerate the bundled known-answer set: `python -m pytest_inferaccept.correctness.generate`.

Every item is written here or drawn from these tables with a fixed seed, so the file is the same
on every run; tests/test_correctness_items.py checks that the shipped file equals this output.
Mixed difficulty on purpose: a 135M model gets a useful share right (SmolLM2-135M on llama.cpp: 46%),
a large model nearly all.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

SEED = 20250125
OUT = Path(__file__).parent / "data" / "known_answers.jsonl"

NUMBER_ONLY = "Answer with the number only."
LETTER_ONLY = "Answer with the letter only."

# (question, accepted answers, difficulty)
FACTS: list[tuple[str, list[str], str]] = [
    ("What is the capital of France?", ["Paris"], "easy"),
    ("What is the capital of Japan?", ["Tokyo"], "easy"),
    ("What is the capital of Italy?", ["Rome"], "easy"),
    ("What is the capital of Germany?", ["Berlin"], "easy"),
    ("What is the capital of Spain?", ["Madrid"], "easy"),
    ("What is the capital of the United Kingdom?", ["London"], "easy"),
    ("What colour is the sky on a clear day?", ["blue"], "easy"),
    ("What colour is fresh grass?", ["green"], "easy"),
    ("What is the opposite of hot?", ["cold"], "easy"),
    ("What is the opposite of up?", ["down"], "easy"),
    ("Which day comes after Monday?", ["Tuesday"], "easy"),
    ("Which month comes after January?", ["February"], "easy"),
    ("What animal says 'meow'?", ["cat", "cats", "a cat"], "easy"),
    ("What is frozen water called?", ["ice"], "easy"),
    ("What is the plural of 'mouse'?", ["mice"], "medium"),
    ("What is the plural of 'child'?", ["children"], "medium"),
    ("What is the capital of Australia?", ["Canberra"], "medium"),
    ("What is the capital of Canada?", ["Ottawa"], "medium"),
    ("What is the largest planet in the Solar System?", ["Jupiter"], "medium"),
    ("Which planet is known as the Red Planet?", ["Mars"], "medium"),
    ("What gas do plants take in from the air to make food?", ["carbon dioxide", "CO2"], "medium"),
    ("What is the chemical symbol for gold?", ["Au"], "medium"),
    ("What is the chemical symbol for sodium?", ["Na"], "hard"),
    ("Who wrote 'Romeo and Juliet'?", ["William Shakespeare", "Shakespeare"], "medium"),
    ("In which continent is Kenya?", ["Africa"], "medium"),
    ("What is the longest river in South America?", ["Amazon", "Amazon River"], "medium"),
    ("What is the past tense of 'go'?", ["went"], "medium"),
    ("What is the capital of Brazil?", ["Brasília", "Brasilia"], "hard"),
    ("What is the capital of Turkey?", ["Ankara"], "hard"),
    ("What is the capital of Switzerland?", ["Bern", "Berne"], "hard"),
    ("Which element has atomic number 1?", ["hydrogen"], "hard"),
    ("Which element has atomic number 6?", ["carbon"], "hard"),
    ("What is the hardest natural substance?", ["diamond", "diamonds"], "hard"),
    ("Who painted the Mona Lisa?", ["Leonardo da Vinci", "Leonardo", "da Vinci"], "hard"),
    ("What is the smallest prime number?", ["2", "two"], "hard"),
    ("In which year did the Second World War end?", ["1945"], "hard"),
    ("What is the capital of New Zealand?", ["Wellington"], "hard"),
    ("What is the square root of 144, written as a word?", ["twelve"], "hard"),
    ("Which ocean lies between Europe and North America?", ["Atlantic", "Atlantic Ocean"], "medium"),
    ("What is the main language spoken in Brazil?", ["Portuguese"], "hard"),
]

GROUPS: dict[str, list[str]] = {
    "fruit": ["apple", "banana", "cherry", "grape", "lemon", "pear", "plum", "mango"],
    "animal": ["dog", "horse", "tiger", "rabbit", "sheep", "lion", "goat", "zebra"],
    "colour": ["red", "green", "yellow", "purple", "brown", "white", "black", "pink"],
    "vehicle": ["car", "bus", "bicycle", "train", "truck", "tram", "boat", "plane"],
    "tool": ["hammer", "saw", "wrench", "drill", "chisel", "screwdriver", "pliers", "shovel"],
}
WORDS = ["river", "lamp", "window", "seven", "garden", "silver", "candle", "paper", "stone", "cloud",
         "pencil", "orange", "winter", "bridge", "music", "forest", "coffee", "rocket", "violet", "harbor"]
NAMES = ["Alice", "Bruno", "Chen", "Dara", "Elif", "Farid", "Greta", "Hugo", "Ines", "Jonas", "Kemal", "Lena"]
CITIES = ["Lisbon", "Oslo", "Dublin", "Prague", "Vienna", "Lima", "Nairobi", "Hanoi", "Quito", "Seoul"]
LETTERS = "ABCD"


def _item(kind: str, difficulty: str, n: int, prompt: str, grader: str, **rest: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"id": f"{kind}-{n:03d}", "prompt": prompt, "grader": grader}
    out.update(rest)
    out["tags"] = {"kind": kind, "difficulty": difficulty}
    return out


def arithmetic(rng: random.Random) -> list[dict[str, Any]]:
    """50 arithmetic items graded as numbers: easy sums up to hard multi-step word problems."""
    items = []
    for n in range(50):
        if n < 15:
            a, b = rng.randint(1, 9), rng.randint(1, 9)
            q, ans, level = f"What is {a} + {b}?", a + b, "easy"
        elif n < 25:
            a, b = rng.randint(11, 99), rng.randint(11, 99)
            if rng.random() < 0.5:
                q, ans = f"What is {a} + {b}?", a + b
            else:
                a, b = max(a, b), min(a, b)
                q, ans = f"What is {a} - {b}?", a - b
            level = "medium"
        elif n < 35:
            a, b = rng.randint(2, 12), rng.randint(2, 12)
            q, ans, level = f"What is {a} times {b}?", a * b, "medium"
        elif n < 43:
            a, b = rng.randint(12, 99), rng.randint(12, 99)
            q, ans, level = f"What is {a} × {b}?", a * b, "hard"
        else:
            rows, per, gone = rng.randint(3, 9), rng.randint(4, 12), rng.randint(1, 9)
            name = rng.choice(NAMES)
            q = (f"{name} has {rows} boxes with {per} pencils in each box and gives away {gone} pencils. "
                 "How many pencils are left?")
            ans, level = rows * per - gone, "hard"
        items.append(_item("arithmetic", level, n, f"{q} {NUMBER_ONLY}", "number", answer=str(ans)))
    return items


def _choice_prompt(question: str, options: list[str]) -> str:
    listed = " ".join(f"{LETTERS[i]}) {o}" for i, o in enumerate(options))
    return f"{question}\n{listed}\n{LETTER_ONLY}"


def choices(rng: random.Random) -> list[dict[str, Any]]:
    """40 letter-choice items: which word belongs to a group, the largest number, a prime."""
    items = []
    groups = sorted(GROUPS)
    for n in range(40):
        if n < 20:
            group = groups[n % len(groups)]
            right = rng.choice(GROUPS[group])
            others = [w for g in groups if g != group for w in GROUPS[g]]
            options = [*rng.sample(others, 3), right]
            article = "an" if group[0] in "aeiou" else "a"
            question, level = f"Which of these is {article} {group}?", "easy"
        elif n < 30:
            nums = rng.sample(range(10, 1000), 4)
            right = str(max(nums))
            options = [str(x) for x in nums]
            question, level = "Which number is the largest?", "medium"
        else:
            primes = [p for p in range(11, 100) if all(p % d for d in range(2, p))]
            composites = [c for c in range(10, 100) if c % 2 and c % 5 and c not in primes]
            right = str(rng.choice(primes))
            options = [*[str(x) for x in rng.sample(composites, 3)], right]
            question, level = "Which of these numbers is prime?", "hard"
        rng.shuffle(options)
        letter = LETTERS[options.index(right)]
        items.append(_item("choice", level, n, _choice_prompt(question, options), "choice", answer=letter))
    return items


def facts() -> list[dict[str, Any]]:
    """40 short facts, each with its accepted answers."""
    return [_item("fact", level, n, f"{q} Answer in as few words as possible.", "fact", answers=accepted)
            for n, (q, accepted, level) in enumerate(FACTS)]


def formats(rng: random.Random) -> list[dict[str, Any]]:
    """40 copy and format items: repeat exactly, uppercase, and JSON with given keys."""
    items = []
    for n in range(40):
        if n < 12:
            text = " ".join(rng.sample(WORDS, 3 if n < 6 else 6))
            level = "easy" if n < 6 else "medium"
            prompt = f"Repeat exactly, with nothing else: {text}"
            items.append(_item("copy", level, n, prompt, "copy", answer=text))
        elif n < 18:
            word = rng.choice(WORDS)
            prompt = f"Write the word '{word}' in capital letters, with nothing else."
            items.append(_item("copy", "medium", n, prompt, "copy", answer=word.upper()))
        elif n < 24:
            code = f"{rng.choice(WORDS).capitalize()}-{rng.randint(100, 999)}_{rng.choice('xyzq')}!"
            prompt = f"Repeat exactly, with nothing else: {code}"
            items.append(_item("copy", "hard", n, prompt, "copy", answer=code))
        elif n < 32:
            name, age = rng.choice(NAMES), rng.randint(18, 80)
            schema = {"type": "object", "required": ["name", "age"],
                      "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}}
            prompt = (f"{name} is {age} years old. Answer in JSON with the keys "
                      '"name" (a string) and "age" (an integer).')
            items.append(_item("json", "medium", n, prompt, "json", schema=schema))
        else:
            name, city, age = rng.choice(NAMES), rng.choice(CITIES), rng.randint(18, 80)
            schema = {"type": "object", "required": ["name", "city", "age"],
                      "properties": {"name": {"const": name}, "city": {"const": city}, "age": {"const": age}}}
            prompt = (f"{name} is {age} and lives in {city}. Answer in JSON with exactly the keys "
                      '"name", "city" and "age", with the values from the sentence.')
            items.append(_item("json", "hard", n, prompt, "json", schema=schema))
    return items


def extraction(rng: random.Random) -> list[dict[str, Any]]:
    """30 items that pull one value out of a short text (a number or a name)."""
    items = []
    for n in range(30):
        name, city = rng.choice(NAMES), rng.choice(CITIES)
        order, count, day = rng.randint(1000, 9999), rng.randint(2, 40), rng.choice(["Monday", "Friday"])
        text = (f"Order {order} from {name} was shipped to {city} on {day}. It contained {count} items.")
        kind = n % 3
        if kind == 0:
            q, grader, accepted, level = "What is the order number?", "number", [str(order)], "easy"
        elif kind == 1:
            q, grader, accepted, level = "To which city was the order shipped?", "fact", [city], "medium"
        else:
            q, grader, accepted, level = "How many items did it contain?", "number", [str(count)], "hard"
        suffix = NUMBER_ONLY if grader == "number" else "Answer with the name only."
        items.append(_item("extraction", level, n, f"Text: {text}\nQuestion: {q} {suffix}", grader,
                           answers=accepted))
    return items


def build() -> list[dict[str, Any]]:
    """The whole bundled set, in a fixed order."""
    rng = random.Random(SEED)
    return [*arithmetic(rng), *choices(rng), *facts(), *formats(rng), *extraction(rng)]


def render() -> str:
    """The JSONL text of the bundled set."""
    return "".join(json.dumps(item, ensure_ascii=False, sort_keys=True) + "\n" for item in build())


def main() -> None:
    """Write the bundled set next to this module."""
    OUT.write_text(render(), encoding="utf-8")
    sys.stdout.write(f"wrote {len(build())} items to {OUT}\n")


if __name__ == "__main__":
    main()
