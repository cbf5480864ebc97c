"""Talks to `wasmclaw serve` with the official OpenAI Python SDK.

    openai_client.py BASE_URL API_KEY
    (or WASMCLAW_BASE_URL and WASMCLAW_API_TOKEN in the environment)

Prints one JSON object, what the SDK saw, for tests/all/serve_openai.rs to
check. Any other failure ends the script with a traceback and exit code 1.
"""

import json
import os
import sys

import openai


def refusal(error):
    """What a client sees of a refused request."""
    return {
        "class": type(error).__name__,
        "status": error.status_code,
        "type": error.type,
        "message": error.body["message"],
    }


def main():
    base_url = sys.argv[1] if len(sys.argv) > 1 else os.environ["WASMCLAW_BASE_URL"]
    api_key = sys.argv[2] if len(sys.argv) > 2 else os.environ["WASMCLAW_API_TOKEN"]
    client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=30)
    seen = {"sdk": openai.__version__}

    # (a) The models.
    seen["models"] = [[m.id, m.owned_by] for m in client.models.list()]

    # (b) Not streamed, with a history before the question.
    completion = client.chat.completions.create(
        model="wasmclaw",
        messages=[
            {"role": "system", "content": "You add numbers."},
            {"role": "user", "content": "I will ask you a sum."},
            {"role": "assistant", "content": "Go ahead."},
            {"role": "user", "content": "What is 40 + 2?"},
        ],
    )
    choice = completion.choices[0]
    seen["completion"] = {
        "id": completion.id,
        "object": completion.object,
        "model": completion.model,
        "choices": len(completion.choices),
        "role": choice.message.role,
        "content": choice.message.content,
        "finish_reason": choice.finish_reason,
        "usage": completion.usage.model_dump(exclude_none=True),
    }

    # (c) Streamed, with the usage in a last chunk.
    stream = client.chat.completions.create(
        model="wasmclaw",
        messages=[{"role": "user", "content": "What is 2 + 3?"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    ids, roles, deltas, finish_reasons, usage = set(), [], [], [], None
    for chunk in stream:
        ids.add(chunk.id)
        for c in chunk.choices:
            roles += [c.delta.role] if c.delta.role else []
            deltas += [c.delta.content] if c.delta.content else []
            finish_reasons += [c.finish_reason] if c.finish_reason else []
        if chunk.usage:
            usage = chunk.usage.model_dump(exclude_none=True)
    seen["stream"] = {
        "ids": sorted(ids),
        "roles": roles,
        "deltas": deltas,
        "text": "".join(deltas),
        "finish_reasons": finish_reasons,
        "usage": usage,
    }

    # (d) Client-side tools: refused.
    weather = {
        "type": "function",
        "function": {"name": "weather", "parameters": {"type": "object", "properties": {}}},
    }
    try:
        client.chat.completions.create(
            model="wasmclaw",
            messages=[{"role": "user", "content": "Weather?"}],
            tools=[weather],
        )
        seen["bad_request"] = None
    except openai.BadRequestError as e:
        seen["bad_request"] = refusal(e)

    # (e) A token that is not the server's.
    wrong = openai.OpenAI(base_url=base_url, api_key="not-the-token", max_retries=0)
    try:
        wrong.models.list()
        seen["unauthorized"] = None
    except openai.AuthenticationError as e:
        seen["unauthorized"] = refusal(e)

    # (f) A turn that fails: a 502, which a client with the default retries
    # must not send again (that would run the turn again).
    retrying = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=30)
    try:
        retrying.chat.completions.create(
            model="wasmclaw", messages=[{"role": "user", "content": "Fail, please."}]
        )
        seen["failed"] = None
    except openai.InternalServerError as e:
        seen["failed"] = refusal(e)

    print(json.dumps(seen))


if __name__ == "__main__":
    main()
