"""A Python agent using only the standard library (urllib): asks the model to spell a word backwards.

The environment (this script, not the model) grades the answer: reward 1 for the exact reversed word, partial
credit for the length of the correct prefix.
"""
import json
import os
import urllib.request

task = json.loads(os.environ["AGENTJET_TASK"])
request = urllib.request.Request(
    os.environ["OPENAI_BASE_URL"] + "/chat/completions",
    data=json.dumps({
        "model": os.environ["AGENTJET_MODEL"],
        "messages": [
            {"role": "system", "content": "Reply with the word spelled backwards, nothing else."},
            {"role": "user", "content": task["word"]},
        ],
        "max_tokens": 16,
    }).encode("utf-8"),
    headers={"content-type": "application/json", "authorization": "Bearer " + os.environ["OPENAI_API_KEY"]},
)
with urllib.request.urlopen(request, timeout=120) as response:
    reply = json.load(response)["choices"][0]["message"]["content"] or ""

expected = task["word"][::-1]
guess = reply.strip().split()[0] if reply.strip() else ""
prefix = 0
while prefix < min(len(guess), len(expected)) and guess[prefix] == expected[prefix]:
    prefix += 1
reward = 1.0 if guess == expected else prefix / (2 * len(expected))
print(json.dumps({"reward": reward, "success": guess == expected, "metrics": {"reply_chars": len(reply)}}))
