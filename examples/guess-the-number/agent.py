"""Guess the number: a multi-turn environment, standard library only.

The environment (this script) holds a secret from 1 to `max`. Each move the model guesses and the environment
answers "higher" or "lower" with the numbers still possible ("higher: 5 6 7"; a range, "higher: 9 to 25", when more
than LISTED_AT_MOST remain), or "correct". The model never sees the secret and never grades itself.

Reward: 1 for finding it within the moves; otherwise up to 0.4 for how far the moves narrowed the range (graded,
so that the repeats of a game differ even when none finds it). Success: found within the moves.
"""
import json
import os
import re
import urllib.request

# Up to this many numbers still possible are listed one by one: a small model picks the middle one of a list more
# easily than it works out the middle of two bounds.
LISTED_AT_MOST = 10

task = json.loads(os.environ["AGENTJET_TASK"])
secret, top, moves = int(task["secret"]), int(task["max"]), int(task["moves"])


def ask(messages):
    request = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"] + "/chat/completions",
        data=json.dumps({"model": os.environ["AGENTJET_MODEL"], "messages": messages, "max_tokens": 8}).encode("utf-8"),
        headers={"content-type": "application/json", "authorization": "Bearer " + os.environ["OPENAI_API_KEY"]},
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.load(response)["choices"][0]["message"]["content"] or ""


def possible(low, high):
    return " ".join(str(n) for n in range(low, high + 1)) if high - low < LISTED_AT_MOST else f"{low} to {high}"


low, high = 1, top
messages = [
    {"role": "system", "content": f"I picked a whole number from 1 to {top}. Find it in {moves} guesses: reply with one number, and I will say higher or lower."},
    {"role": "user", "content": f"{possible(1, top)}. Your guess?"},
]
found, used = False, 0
while used < moves and not found:
    reply = ask(messages)
    used += 1
    match = re.search(r"\d+", reply)
    guess = int(match.group(0)) if match else None
    if guess == secret:
        found = True
        answer = "correct"
    elif guess is None or not low <= guess <= high:
        answer = f"not one of {possible(low, high)}. Your guess?"
    elif guess < secret:
        low = guess + 1
        answer = f"higher: {possible(low, high)}. Your guess?"
    else:
        high = guess - 1
        answer = f"lower: {possible(low, high)}. Your guess?"
    messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": answer}]

reward = 1.0 if found else 0.4 * (top - (high - low + 1)) / (top - 1)
print(json.dumps({"reward": reward, "success": found, "metrics": {"moves": used, "range_left": 0 if found else high - low + 1}}))
