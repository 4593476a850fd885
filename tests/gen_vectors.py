#!/usr/bin/python3
"""tests/gen_vectors.py — reference vectors for tests/unit_wire.c, made by
jupyter_client itself (Debian's python3-jupyter-client).

Run once and commit the output; the C tests read it as data:

    /usr/bin/python3 tests/gen_vectors.py > tests/data/vectors.json

With --fuzz-corpus DIR it instead (re)writes the seed corpus of
tests/fuzz_wire.c into DIR (tests/fuzz_corpus): messages whose frames are
joined by the byte 0x1e; signed-* are signed with the fuzz target's key
"fuzz-key", unsigned-* carry an empty signature, other seeds are not messages.

The output is deterministic: every header has a fixed msg_id and date.

Layout of the JSON document:

  "signatures": a list of
      {name, key, scheme, header, parent_header, metadata, content,
       buffers_b64, signature, supported}
    key and the four dicts are strings whose UTF-8 bytes are exactly what is
    signed; signature is Session.sign() over the four dicts (never the
    buffers); supported is false for schemes libkbox refuses.

  "messages": a list of
      {name, key, scheme, frames_b64, identities_b64, expect}
    frames_b64 is Session.serialize() output (plus buffers appended as
    Session.send does), each frame base64-encoded because identities may be
    binary; expect holds msg_type, msg_id, parent_msg_id (or null), session,
    username, date_epoch, content (a JSON object) and buffers_b64.
"""

import base64
import datetime
import json
import sys

from jupyter_client.session import Session

UTC = datetime.timezone.utc


def b64(data):
    return base64.b64encode(data).decode("ascii")


def session(key, scheme="hmac-sha256"):
    return Session(key=key.encode("utf-8"), signature_scheme=scheme,
                   session="5f2b6d3c-0d7e-4f5a-9a51-3c1e0d9b7a10",
                   username="kbox-test")


def header(s, msg_id, msg_type, when):
    return {
        "msg_id": msg_id,
        "msg_type": msg_type,
        "username": s.username,
        "session": s.session,
        "date": when,
        "version": "5.3",
    }


def sig_case(name, key, dicts, scheme="hmac-sha256", buffers=(), supported=True):
    s = session(key, scheme)
    parts = [d.encode("utf-8") for d in dicts]
    return {
        "name": name,
        "key": key,
        "scheme": scheme,
        "header": dicts[0],
        "parent_header": dicts[1],
        "metadata": dicts[2],
        "content": dicts[3],
        "buffers_b64": [b64(b) for b in buffers],
        "signature": s.sign(parts).decode("ascii"),
        "supported": supported,
    }


def signatures():
    hdr = ('{"msg_id": "0b2c6a8e-1f0d-4c1e-9d2a-7e4b1c9a0f11", "msg_type": '
           '"execute_request", "username": "kbox-test", "session": '
           '"5f2b6d3c-0d7e-4f5a-9a51-3c1e0d9b7a10", "date": '
           '"2026-06-06T17:21:05.123456Z", "version": "5.3"}')
    content = '{"code": "print(1+1)", "silent": false}'
    uni_content = '{"code": "print(\'h\u00e9llo w\u00f6rld \U0001F30D \u2603\')"}'
    return [
        sig_case("basic", "a0436f6c-1916-498b-8eb9-e81ab9368e84",
                 [hdr, "{}", "{}", content]),
        sig_case("unicode_key_and_content", "cl\u00e9-\u043a\u043b\u044e\u0447-\U0001F511",
                 [hdr, "{}", '{"note": "\u00fcber"}', uni_content]),
        sig_case("empty_dicts", "secret", ["{}", "{}", "{}", "{}"]),
        sig_case("buffers_not_signed", "secret",
                 [hdr, "{}", "{}", '{"data": {}}'],
                 buffers=[b"\x00\x01\x02binary\xff", b"second buffer"]),
        sig_case("key_longer_than_block", "k" * 100,
                 [hdr, "{}", "{}", content]),
        sig_case("empty_key", "", [hdr, "{}", "{}", content]),
        sig_case("hmac_sha512_unsupported", "secret",
                 [hdr, "{}", "{}", content], scheme="hmac-sha512",
                 supported=False),
    ]


def message(name, key, msg_type, msg_id, content, when, parent=None,
            idents=(), buffers=(), metadata=None):
    s = session(key)
    h = header(s, msg_id, msg_type, when)
    msg = s.msg(msg_type, content=content, parent=parent, header=h,
                metadata=metadata)
    frames = s.serialize(msg, ident=list(idents))
    frames.extend(buffers)  # what Session.send does with buffers
    return {
        "name": name,
        "key": key,
        "scheme": "hmac-sha256",
        "frames_b64": [b64(f) for f in frames],
        "identities_b64": [b64(i) for i in idents],
        "expect": {
            "msg_type": msg_type,
            "msg_id": msg_id,
            "parent_msg_id": parent["header"]["msg_id"] if parent else None,
            "session": s.session,
            "username": s.username,
            "date_epoch": when.timestamp(),
            "content": content,
            "buffers_b64": [b64(b) for b in buffers],
        },
    }


def messages():
    key = "a0436f6c-1916-498b-8eb9-e81ab9368e84"
    t0 = datetime.datetime(2026, 6, 6, 17, 21, 5, 123456, tzinfo=UTC)
    t1 = datetime.datetime(2026, 6, 6, 17, 21, 5, 654321, tzinfo=UTC)
    request = message("execute_request", key, "execute_request",
                      "0b2c6a8e-1f0d-4c1e-9d2a-7e4b1c9a0f11",
                      {"code": "print(1+1)", "silent": False,
                       "store_history": True, "user_expressions": {},
                       "allow_stdin": False, "stop_on_error": True}, t0)
    s = session(key)
    parent = s.msg("execute_request",
                   header=header(s, "0b2c6a8e-1f0d-4c1e-9d2a-7e4b1c9a0f11",
                                 "execute_request", t0))
    reply = message("execute_reply_with_identities", key, "execute_reply",
                    "c3d4e5f6-0718-4293-a4b5-c6d7e8f90a1b",
                    {"status": "ok", "execution_count": 1,
                     "user_expressions": {}}, t1, parent=parent,
                    idents=[b"\x00k\x8b\x45\x67", b"router-peer"])
    stream = message("stream_unicode", "cl\u00e9-\u043a\u043b\u044e\u0447-\U0001F511",
                     "stream", "d4e5f607-1829-43a4-b5c6-d7e8f90a1b2c",
                     {"name": "stdout",
                      "text": "h\u00e9llo w\u00f6rld \U0001F30D \u2603\n"}, t1,
                     parent=parent, metadata={"note": "\u00fcber"})
    comm = message("comm_msg_with_buffers", key, "comm_msg",
                   "e5f60718-2a3b-44b5-86d7-e8f90a1b2c3d",
                   {"comm_id": "f6071829-3a4b-45c6-97e8-f90a1b2c3d4e",
                    "data": {"method": "update"}}, t1, parent=parent,
                   idents=[b"ident-1"],
                   buffers=[b"\x00\x01\x02binary\xff", b"second buffer"])
    return [request, reply, stream, comm]


FUZZ_KEY = "fuzz-key"  # FUZZ_KEY in tests/fuzz_wire.c
FUZZ_SEPARATOR = b"\x1e"  # SEPARATOR in tests/fuzz_wire.c


def fuzz_seed(key, msg_type, msg_id, content, date, idents=(), buffers=(),
              parent=None):
    s = session(key)
    h = header(s, msg_id, msg_type, date)
    frames = s.serialize(s.msg(msg_type, content=content, parent=parent,
                               header=h), ident=list(idents))
    frames.extend(buffers)
    assert not any(FUZZ_SEPARATOR in f for f in frames)
    return FUZZ_SEPARATOR.join(frames)


def fuzz_corpus(outdir):
    import os
    t0 = datetime.datetime(2026, 6, 6, 17, 21, 5, 123456, tzinfo=UTC)
    s = session(FUZZ_KEY)
    parent = s.msg("execute_request", header=header(
        s, "0b2c6a8e-1f0d-4c1e-9d2a-7e4b1c9a0f11", "execute_request", t0))
    seeds = {
        "signed-execute_request": fuzz_seed(
            FUZZ_KEY, "execute_request", "0b2c6a8e-1f0d-4c1e-9d2a-7e4b1c9a0f11",
            {"code": "print(1+1)", "silent": False, "store_history": True,
             "user_expressions": {}, "allow_stdin": False,
             "stop_on_error": True}, t0),
        "signed-reply_with_identities_and_buffers": fuzz_seed(
            FUZZ_KEY, "comm_msg", "e5f60718-2a3b-44b5-86d7-e8f90a1b2c3d",
            {"comm_id": "f6071829-3a4b-45c6-97e8-f90a1b2c3d4e",
             "data": {"method": "update", "n": [1, 2.5, None, True]}}, t0,
            idents=[b"\x00k\x8bEg", b"router-peer"],
            buffers=[b"\x00\x01\x02binary\xff", b""], parent=parent),
        "signed-stream_unicode": fuzz_seed(
            FUZZ_KEY, "stream", "d4e5f607-1829-43a4-b5c6-d7e8f90a1b2c",
            {"name": "stdout", "text": "h\u00e9llo \U0001F30D \u2603\n\u0000"},
            t0, parent=parent),
        "signed-lenient_date": fuzz_seed(
            FUZZ_KEY, "status", "a1b2c3d4-0000-4000-8000-000000000001",
            {"execution_state": "idle"}, "2026-06-06T17:21+0000"),
        "unsigned-kernel_info_request": fuzz_seed(
            "", "kernel_info_request", "a1b2c3d4-0000-4000-8000-000000000002",
            {}, "2026-06-06T17:21:05.123456+02:00"),
        "date-with_zone": b"2026-06-06T17:21:05.123456+02:00",
        "bad-no_delimiter": FUZZ_SEPARATOR.join(
            [b"ident", b"", b"{}", b"{}", b"{}", b"{}"]),
    }
    os.makedirs(outdir, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(outdir, name), "wb") as f:
            f.write(data)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--fuzz-corpus":
        fuzz_corpus(sys.argv[2])
        return
    doc = {
        "generator": "tests/gen_vectors.py with jupyter_client "
                     + __import__("jupyter_client").__version__,
        "signatures": signatures(),
        "messages": messages(),
    }
    json.dump(doc, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
