"""A table of bad requests, each with its expected status and OpenAI error type, against a server
started with --api-key and a small --max-queue; then /health still answers 200."""

import json
import threading
import time

from common import API_KEY, check, get, request, run

CHAT = "/v1/chat/completions"
COMP = "/v1/completions"
MSG = [{"role": "user", "content": "Hi"}]
BAD = "invalid_request_error"


def chat(**extra):
    return dict({"messages": MSG, "max_tokens": 2}, **extra)


# (what, method, path, body, headers, status, error type, param or None)
TABLE = [
    ("malformed JSON", "POST", CHAT, b'{"messages": [', {}, 400, BAD, None),
    ("JSON that is not an object", "POST", CHAT, b"[1, 2]", {}, 400, BAD, None),
    ("invalid UTF-8", "POST", CHAT, b'{"messages": "\xff\xfe"}', {}, 400, BAD, None),
    ("empty body", "POST", CHAT, b"", {}, 400, BAD, None),
    ("no messages", "POST", CHAT, {"max_tokens": 2}, {}, 400, BAD, "messages"),
    ("empty messages", "POST", CHAT, {"messages": []}, {}, 400, BAD, "messages"),
    ("messages not an array", "POST", CHAT, {"messages": "hi"}, {}, 400, BAD, "messages"),
    ("unknown role", "POST", CHAT, {"messages": [{"role": "wizard", "content": "x"}]}, {}, 400, BAD, "messages"),
    ("content of the wrong type", "POST", CHAT, {"messages": [{"role": "user", "content": 5}]}, {}, 400, BAD, "messages"),
    ("temperature of the wrong type", "POST", CHAT, chat(temperature="hot"), {}, 400, BAD, "temperature"),
    ("temperature out of range", "POST", CHAT, chat(temperature=7), {}, 400, BAD, "temperature"),
    ("negative top_p", "POST", CHAT, chat(top_p=-0.5), {}, 400, BAD, "top_p"),
    ("max_tokens 0", "POST", CHAT, chat(max_tokens=0), {}, 400, BAD, "max_tokens"),
    ("negative max_tokens", "POST", CHAT, chat(max_tokens=-5), {}, 400, BAD, "max_tokens"),
    ("prompt + max_tokens over the context", "POST", CHAT, chat(max_tokens=10 ** 6), {}, 400, BAD, "max_tokens"),
    ("a prompt longer than the context", "POST", COMP, {"prompt": "word " * 3000}, {}, 400, BAD, "messages"),
    ("n = 2", "POST", CHAT, chat(n=2), {}, 400, BAD, "n"),
    ("five stop strings", "POST", CHAT, chat(stop=list("abcde")), {}, 400, BAD, "stop"),
    ("an empty stop string", "POST", CHAT, chat(stop=[""]), {}, 400, BAD, "stop"),
    ("absurd frequency_penalty", "POST", CHAT, chat(frequency_penalty=1e9), {}, 400, BAD, "frequency_penalty"),
    ("seed of the wrong type", "POST", CHAT, chat(seed="abc"), {}, 400, BAD, "seed"),
    ("top_logprobs over 20", "POST", CHAT, chat(logprobs=True, top_logprobs=50), {}, 400, BAD, "top_logprobs"),
    ("stream_options not an object", "POST", CHAT, chat(stream_options=3), {}, 400, BAD, "stream_options"),
    ("unknown model", "POST", CHAT, chat(model="gpt-17"), {}, 404, BAD, "model"),
    ("unknown model by path", "GET", "/v1/models/gpt-17", None, {}, 404, BAD, "model"),
    ("no prompt", "POST", COMP, {"max_tokens": 2}, {}, 400, BAD, "prompt"),
    ("empty prompt", "POST", COMP, {"prompt": ""}, {}, 400, BAD, "prompt"),
    ("token id outside the vocabulary", "POST", COMP, {"prompt": [1, 10 ** 9]}, {}, 400, BAD, "prompt"),
    ("two prompts", "POST", COMP, {"prompt": ["a", "b"]}, {}, 400, BAD, "prompt"),
    ("legacy logprobs over 5", "POST", COMP, {"prompt": "a", "logprobs": 9}, {}, 400, BAD, "logprobs"),
    ("echo", "POST", COMP, {"prompt": "a", "echo": True}, {}, 400, BAD, "echo"),
    ("a body over the size limit", "POST", CHAT, b'{"messages": "' + b"x" * (5 << 20) + b'"}', {}, 413, BAD, None),
    ("no API key", "POST", CHAT, chat(), {"Authorization": None}, 401, "authentication_error", None),
    ("wrong API key", "POST", CHAT, chat(), {"Authorization": "Bearer wrong"}, 401, "authentication_error", None),
    ("wrong API key on /v1/models", "GET", "/v1/models", None, {"Authorization": "Bearer x"}, 401,
     "authentication_error", None),
    ("wrong method", "GET", CHAT, None, {}, 405, BAD, None),
    ("unknown route", "POST", "/v1/nothing", {}, {}, 404, "not_found_error", None),
    ("detokenize a negative id", "POST", "/detokenize", {"tokens": [-1]}, {}, 400, BAD, "tokens"),
    ("tokenize without content", "POST", "/tokenize", {"text": "x"}, {}, 400, BAD, "content"),
]


def oversized(path, body):
    """(status, body) of a POST whose body the server refuses before it has all been sent: the
    answer is read even though the server stops reading (a plain client sees a broken pipe)."""
    import socket
    from urllib.parse import urlparse

    from common import URL
    u = urlparse(URL)
    s = socket.create_connection((u.hostname, u.port), timeout=30)
    head = (f"POST {path} HTTP/1.1\r\nHost: {u.hostname}\r\nContent-Type: application/json\r\n"
            f"Authorization: Bearer {API_KEY}\r\nContent-Length: {len(body)}\r\n\r\n")
    try:
        s.sendall(head.encode() + body)
    except (BrokenPipeError, ConnectionResetError):
        pass
    data = b""
    try:
        while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < 20:
            more = s.recv(65536)
            if not more:
                break
            data += more
    except (ConnectionResetError, socket.timeout):
        pass
    s.close()
    head, _, rest = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1]) if head else 0
    return status, rest.decode(errors="replace")


def test_bad_requests_table():
    check(len(TABLE) >= 20, "at least 20 rows")
    wrong = []
    for what, method, path, body, headers, status, kind, param in TABLE:
        if isinstance(body, bytes) and len(body) > 1 << 20:
            got, text = oversized(path, body)
        else:
            got, text, _ = request(method, path, body, headers)
        try:
            err = json.loads(text)["error"]
            ok = got == status and err["type"] == kind and (param is None or err["param"] == param)
            ok = ok and isinstance(err["message"], str) and "code" in err
        except (ValueError, KeyError, TypeError):
            ok = False
        print(f"  {'ok ' if ok else 'BAD'} {got} {what}")
        if not ok:
            wrong.append(f"{what}: want {status} {kind} {param}, got {got} {text[:200]}")
    check(not wrong, "\n".join(wrong))
    status, _, _ = get("/health", {"Authorization": None})
    check(status == 200, f"/health after the table: {status}")


def test_a_full_queue_gets_429_with_retry_after():
    # The server runs with --max-queue 4: four long streams fill it.
    import http.client
    from urllib.parse import urlparse

    from common import URL
    u = urlparse(URL)
    conns = []
    for _ in range(4):
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
        body = json.dumps(chat(max_tokens=400, stream=True, messages=[{"role": "user", "content": "Count to 500."}]))
        c.request("POST", CHAT, body, {"Authorization": "Bearer " + API_KEY, "Content-Type": "application/json"})
        r = c.getresponse()
        check(r.status == 200, f"stream admitted: {r.status}")
        r.readline()
        conns.append((c, r))
    status, text, headers = request("POST", CHAT, chat())
    for c, _ in conns:
        c.close()  # hang up: the engine frees their pages
    check(status == 429 and json.loads(text)["error"]["type"] == "rate_limit_error", f"{status} {text}")
    check({k.lower(): v for k, v in headers.items()}.get("retry-after") == "1", f"Retry-After: {headers}")
    for _ in range(100):
        status, _, _ = request("POST", CHAT, chat())
        if status == 200:
            break
        time.sleep(0.1)
    check(status == 200, f"admitted again once the streams hung up: {status}")
    check(get("/health")[0] == 200, "/health")


if __name__ == "__main__":
    run([test_bad_requests_table, test_a_full_queue_gets_429_with_retry_after])
