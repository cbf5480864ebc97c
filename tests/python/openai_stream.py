"""Streams completions from `wasmclaw serve` with the official OpenAI Python SDK.

    openai_stream.py BASE_URL API_KEY

(a) streamed, while the model's first attempt is cut mid-stream and retried;
(b) not streamed, (c) streamed, each a turn that reaches its iteration limit.
Prints one JSON object, what the SDK saw, for tests/all/serve_openai.rs.
"""

import json
import sys

import openai


def streamed(client, question):
    """The deltas and finish reasons of one streamed completion."""
    stream = client.chat.completions.create(
        model="wasmclaw",
        messages=[{"role": "user", "content": question}],
        stream=True,
    )
    deltas, finish_reasons = [], []
    for chunk in stream:
        for c in chunk.choices:
            deltas += [c.delta.content] if c.delta.content else []
            finish_reasons += [c.finish_reason] if c.finish_reason else []
    return {"text": "".join(deltas), "deltas": deltas, "finish_reasons": finish_reasons}


def main():
    client = openai.OpenAI(base_url=sys.argv[1], api_key=sys.argv[2], max_retries=0, timeout=30)
    seen = {"retried": streamed(client, "The fox?")}
    completion = client.chat.completions.create(
        model="wasmclaw", messages=[{"role": "user", "content": "2 + 3?"}]
    )
    seen["limit"] = {
        "content": completion.choices[0].message.content,
        "finish_reason": completion.choices[0].finish_reason,
    }
    seen["limit_streamed"] = streamed(client, "3 + 4?")
    print(json.dumps(seen))


if __name__ == "__main__":
    main()
