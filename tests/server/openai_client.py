"""The real `openai` client against `ultra serve` on loopback with the reference model."""

from common import URL, check, client, generate_json, metrics, request, run

QUESTION = "What is the capital of France?"


def model_name():
    models = client().models.list().data
    check(len(models) == 1, f"one model listed, got {models}")
    return models[0].id


def test_model_list():
    name = model_name()
    check(name.startswith("SmolLM2"), f"listed under the file's stem, got {name}")
    check(client().models.retrieve(name).id == name, "GET /v1/models/{name}")


def test_chat_greedy_equals_generate():
    want = generate_json(QUESTION, 16)
    r = client().chat.completions.create(
        model=model_name(), messages=[{"role": "user", "content": QUESTION}], max_tokens=16, temperature=0,
        extra_body={"return_token_ids": True},
    )
    d = r.model_dump()
    check(d["prompt_token_ids"] == want["prompt_tokens"], "the chat template gives the CLI's prompt")
    check(d["choices"][0]["token_ids"] == want["tokens"], f"{d['choices'][0]['token_ids']} != {want['tokens']}")
    check(r.choices[0].message.content == want["text"], f"{r.choices[0].message.content!r} != {want['text']!r}")
    check(r.usage.prompt_tokens == len(want["prompt_tokens"]), "usage.prompt_tokens")
    check(r.usage.completion_tokens == len(want["tokens"]), "usage.completion_tokens")
    check(r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens, "usage.total_tokens")
    reason = "stop" if len(want["tokens"]) < 16 else "length"
    check(r.choices[0].finish_reason == reason, f"finish_reason {r.choices[0].finish_reason}")


def test_chat_stream_equals_whole():
    args = dict(model=model_name(), messages=[{"role": "user", "content": QUESTION}], max_tokens=12)
    whole = client().chat.completions.create(**args)
    chunks = list(client().chat.completions.create(**args, stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    check(text == whole.choices[0].message.content, f"{text!r} != {whole.choices[0].message.content!r}")
    check(chunks[0].choices[0].delta.role == "assistant", "the first chunk carries the role")
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    check(finishes == [whole.choices[0].finish_reason], f"one finish_reason, got {finishes}")
    check(chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == whole.usage.completion_tokens,
          "include_usage: a last chunk with the usage")


def test_completions_whole_and_streamed():
    args = dict(model=model_name(), prompt="The capital of France is", max_tokens=8, temperature=0)
    whole = client().completions.create(**args)
    check(whole.choices[0].finish_reason == "length", f"finish_reason {whole.choices[0].finish_reason}")
    check(whole.usage.completion_tokens == 8, f"8 tokens, got {whole.usage.completion_tokens}")
    check("Paris" in whole.choices[0].text, f"knows Paris: {whole.choices[0].text!r}")
    text = "".join(c.choices[0].text for c in client().completions.create(**args, stream=True))
    check(text == whole.choices[0].text, f"{text!r} != {whole.choices[0].text!r}")
    # Raw SSE: events end with data: [DONE].
    status, body, headers = request("POST", "/v1/completions", dict(args, stream=True))
    check(status == 200 and headers["content-type"].startswith("text/event-stream"), f"{status} {headers}")
    check(body.rstrip().endswith("data: [DONE]"), f"ends with [DONE]: {body[-80:]!r}")


def test_stop_strings_are_never_emitted():
    args = dict(model=model_name(), prompt="List three colors:", max_tokens=16, temperature=0)
    full = client().completions.create(**args).choices[0].text
    k = len(full) // 2
    stop = full[k:k + 3]
    check(len(stop.strip()) > 0, f"a stop string from the middle of {full!r}")
    want = full[:full.find(stop)]
    r = client().completions.create(**args, stop=[stop, "never-appears"])
    check(r.choices[0].text == want, f"{r.choices[0].text!r} != {want!r} (stop {stop!r})")
    check(r.choices[0].finish_reason == "stop", f"finish_reason {r.choices[0].finish_reason}")
    streamed = "".join(c.choices[0].text for c in client().completions.create(**args, stop=stop, stream=True))
    check(streamed == want, f"streamed {streamed!r} != {want!r}")


def test_finish_reason_length():
    r = client().chat.completions.create(model=model_name(), messages=[{"role": "user", "content": "Tell me a story."}],
                                         max_completion_tokens=3)
    check(r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 3, f"{r}")


def test_cached_tokens_on_a_repeated_system_prompt():
    system = "You are a careful assistant for a library. " + " ".join(
        f"Rule {i}: answer briefly and cite shelf {i}." for i in range(30))
    before = metrics()
    usages = []
    for question in ["Where are the maps?", "Where are the novels?"]:
        r = client().chat.completions.create(model=model_name(), max_tokens=2, messages=[
            {"role": "system", "content": system}, {"role": "user", "content": question}])
        usages.append(r.usage)
    check(usages[0].prompt_tokens > 200, f"a long system prompt: {usages[0].prompt_tokens} tokens")
    cached = usages[1].prompt_tokens_details.cached_tokens
    check(cached > 0, f"the second request reuses the system prompt's pages, cached_tokens {cached}")
    after = metrics()
    check(after["ultra_prefix_cache_hits_total"] > before["ultra_prefix_cache_hits_total"], "prefix-cache hit counted")


def test_logprobs_and_seeded_sampling():
    args = dict(model=model_name(), messages=[{"role": "user", "content": QUESTION}], max_tokens=5)
    r = client().chat.completions.create(**args, logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    check(len(content) == r.usage.completion_tokens, "one entry per token")
    for e in content:
        check(len(e.top_logprobs) == 3 and e.top_logprobs[0].token == e.token and e.logprob <= 0, f"{e}")
    sampled = [client().chat.completions.create(**args, temperature=0.9, top_p=0.9, seed=7).choices[0].message.content
               for _ in range(2)]
    check(sampled[0] == sampled[1], f"equal seeds, equal text: {sampled}")


def test_tokenize_round_trip():
    status, body, _ = request("POST", "/tokenize", {"content": "Hello, world!"})
    import json
    ids = json.loads(body)["tokens"]
    check(status == 200 and len(ids) > 2, body)
    status, body, _ = request("POST", "/detokenize", {"tokens": ids})
    check(status == 200 and json.loads(body)["content"] == "Hello, world!", body)


if __name__ == "__main__":
    print("server:", URL)
    run([test_model_list, test_chat_greedy_equals_generate, test_chat_stream_equals_whole,
         test_completions_whole_and_streamed, test_stop_strings_are_never_emitted, test_finish_reason_length,
         test_cached_tokens_on_a_repeated_system_prompt, test_logprobs_and_seeded_sampling, test_tokenize_round_trip])
