#!/usr/bin/env python3
"""kvgate Python oracle: what does a Python worker see under kv_hints?

The GPU worker behind kvgate parses request bodies with json.loads on the raw
bytes.  This script reads forwarded bodies the same way and checks them
against the conformance vectors in tests/vectors/.

  python3 tests/oracle/oracle.py
      Mode A: check the vectors themselves.  For every forwarded case, the
      expected forwarded body is parsed with json.loads and what the worker sees
      under top-level kv_hints is checked against trust mode and outcome; the
      rest of the body must be what json.loads of the request gives; the
      expected bytes must follow from the request by the member-removal /
      value-replacement rule; canonical_hint must be the canonical compact form
      of the request's hint, and exactly what the worker's own compact
      json.dumps writes for the hint it read (numbers as Python writes them),
      and a hint discarded as oversized must be over 65,536 bytes as the
      worker measures it.  Reject cases are checked for shape.  A gRPC
      case passed uninspected must carry a gRPC content type and a gRPC
      message prefix, and json.loads must fail on its body.

  python3 tests/oracle/oracle.py --forwarded FILE_OR_DIR [--require-all]
      Mode B: FILE is JSON lines {"name", "mode", "status", "body_base64"}
      written by a host under test (a directory means every *.jsonl in it).
      Each line is checked against its vector: mode, status, exact forwarded
      bytes and the worker's view as in mode A.  Forwarded cases must report
      status 200; rejected cases their expect.status, and a non-empty reply
      body must be an OpenAI-style error.

Prints failures, then "N passed, M failed"; exits 1 when M > 0.
Python 3.11, standard library only.
"""

import argparse
import base64
import glob
import json
import math
import os
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_VECTORS = os.path.normpath(os.path.join(HERE, "..", "vectors"))
COUNTER_KEYS = ["untrusted", "unknown_version", "oversized", "malformed", "admitted", "rejected_bodies"]
GRPC_COUNTER_KEYS = ["grpc_uninspected", "grpc_refused"]  # optional, absent means 0
# With router_only: refusals, and the fields removed as "field=n,..." in name order.
ROUTER_COUNTER_KEYS = ["router_only_refused", "router_only_removed"]
# The grpc-status of the filter's answer to a request labelled gRPC, by the
# HTTP status it stands for.
GRPC_STATUS_OF = {400: 3, 413: 8, 415: 12}
OUTCOMES = {"no_hint", "null_hint", "stripped", "admitted", "discarded", "rejected", "uninspected", "refused"}
REASONS = {"untrusted", "unknown_version", "oversized", "malformed"}
WS = " \t\n\r"
BOM = b"\xef\xbb\xbf"


class Fail(Exception):
    pass


def need(cond, msg):
    if not cond:
        raise Fail(msg)


# ---------------------------------------------------------------------------
# Reading bodies the way the worker does.
# ---------------------------------------------------------------------------

def worker_view(b):
    """json.loads on the raw bytes, exactly as the worker."""
    return json.loads(b)


def py_reads(b):
    try:
        json.loads(b)
        return True
    except Exception:
        return False


def is_grpc_ct(v):
    """application/grpc or application/grpc+<subtype>, parameters allowed,
    any letter case (not application/grpc-web)."""
    import re
    return re.fullmatch(r"[ \t]*application/grpc(\+[^;\s]+)?[ \t]*(;.*)?", v or "", re.IGNORECASE | re.DOTALL) is not None


def same(a, b):
    """Deep equality that keeps types apart (1 != 1.0 != True), keeps key
    order and treats NaN as equal to NaN."""
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        if type(x) is not type(y):
            return False
        if isinstance(x, float):
            if math.isnan(x) and math.isnan(y):
                continue
            if x != y or math.copysign(1, x) != math.copysign(1, y):
                return False
        elif isinstance(x, dict):
            if list(x.keys()) != list(y.keys()):
                return False
            stack.extend((x[k], y[k]) for k in x)
        elif isinstance(x, list):
            if len(x) != len(y):
                return False
            stack.extend(zip(x, y))
        elif x != y:
            return False
    return True


class Member:
    __slots__ = ("name", "key_start", "key_end", "value_start", "value_end")

    def __init__(self, name, key_start, key_end, value_start, value_end):
        self.name, self.key_start, self.key_end = name, key_start, key_end
        self.value_start, self.value_end = value_start, value_end


_DECODER = json.JSONDecoder()


def skip_ws(s, i):
    while i < len(s) and s[i] in WS:
        i += 1
    return i


def scan_top(b):
    """Split a UTF-8 body into (prefix_bytes, text, members) where members are
    the top-level object members with character offsets into text, or None
    when the top-level value is not an object.  Uses Python's own string and
    value scanners so that escapes are decoded exactly as json.loads does."""
    enc = json.detect_encoding(b)
    need(enc in ("utf-8", "utf-8-sig"), "body is not UTF-8 (detected %s)" % enc)
    prefix = BOM if enc == "utf-8-sig" else b""
    text = b[len(prefix):].decode("utf-8", "surrogatepass")
    i = skip_ws(text, 0)
    if i >= len(text) or text[i] != "{":
        return prefix, text, None
    members = []
    i = skip_ws(text, i + 1)
    if text[i] == "}":
        return prefix, text, members
    while True:
        need(text[i] == '"', "expected a key at offset %d" % i)
        name, key_end = json.decoder.scanstring(text, i + 1, True)
        j = skip_ws(text, key_end)
        need(text[j] == ":", "expected ':' at offset %d" % j)
        j = skip_ws(text, j + 1)
        _, end = _DECODER.raw_decode(text, j)
        members.append(Member(name, i, key_end, j, end))
        k = skip_ws(text, end)
        if text[k] == ",":
            i = skip_ws(text, k + 1)
            continue
        need(text[k] == "}", "expected ',' or '}' at offset %d" % k)
        return prefix, text, members


def enc(prefix, s):
    return prefix + s.encode("utf-8", "surrogatepass")


def remove_hints(b):
    """The body with every top-level kv_hints member removed, other bytes kept
    (the member-removal rule of the vector format)."""
    prefix, text, members = scan_top(b)
    if not members:
        return b
    out = [text[:members[0].key_start]]
    first = True
    for idx, m in enumerate(members):
        if m.name == "kv_hints":
            continue
        if not first:
            out.append(text[members[idx - 1].value_end:m.key_start])
        out.append(text[m.key_start:m.value_end])
        first = False
    out.append(text[members[-1].value_end:])
    return enc(prefix, "".join(out))


def replace_hint(b, canonical):
    prefix, text, members = scan_top(b)
    hints = [m for m in members if m.name == "kv_hints"]
    need(len(hints) == 1, "expected exactly one kv_hints member in the request, found %d" % len(hints))
    m = hints[0]
    # An admitted envelope goes out under the literal key, however spelled.
    return enc(prefix, text[:m.key_start] + '"kv_hints"' + text[m.key_end:m.value_start] + canonical + text[m.value_end:])


def hint_members(b):
    prefix, text, members = scan_top(b)
    if members is None:
        return prefix, text, []
    return prefix, text, [m for m in members if m.name == "kv_hints"]


# Canonical compact form, written independently of the generator.  Numbers
# are what the worker's json.dumps writes for what json.loads read: ints
# exactly, floats as float.__repr__ (Infinity past the largest double), NaN
# and Infinity as they came.

class _Lit:
    __slots__ = ("text",)

    def __init__(self, text):
        self.text = text


def canonical_of(raw):
    v = json.loads(raw, object_pairs_hook=lambda pairs: ("obj", pairs), parse_constant=_Lit)
    out = []
    stack = [v]
    while stack:
        x = stack.pop()
        if isinstance(x, tuple) and x[0] == "tok":
            out.append(x[1])
        elif isinstance(x, tuple) and x[0] == "obj":
            items = [("tok", "{")]
            for n, (k, val) in enumerate(x[1]):
                items.append(("tok", ("," if n else "") + json.dumps(k, ensure_ascii=False) + ":"))
                items.append(val)
            items.append(("tok", "}"))
            stack.extend(reversed(items))
        elif isinstance(x, list):
            items = [("tok", "[")]
            for n, val in enumerate(x):
                if n:
                    items.append(("tok", ","))
                items.append(val)
            items.append(("tok", "]"))
            stack.extend(reversed(items))
        elif isinstance(x, str):
            out.append(json.dumps(x, ensure_ascii=False))
        elif isinstance(x, _Lit):
            out.append(x.text)
        else:
            out.append(json.dumps(x))
    return "".join(out)


# ---------------------------------------------------------------------------
# Vectors.
# ---------------------------------------------------------------------------

def one_body(d, text_key, b64_key, what):
    has_t, has_b = text_key in d, b64_key in d
    need(has_t != has_b, "%s: exactly one of %s / %s" % (what, text_key, b64_key))
    if has_t:
        need(isinstance(d[text_key], str), "%s: %s must be a string" % (what, text_key))
        return d[text_key].encode("utf-8")
    return base64.b64decode(d[b64_key], validate=True)


def load_vectors(vdir):
    cases, problems = {}, []
    files = sorted(glob.glob(os.path.join(vdir, "*.json")))
    if not files:
        problems.append(("<vectors>", "no *.json files in %s" % vdir))
    for f in files:
        group = os.path.basename(f)[:-5]
        with open(f, "rb") as fh:
            data = json.loads(fh.read())
        if data.get("group") != group or not isinstance(data.get("cases"), list):
            problems.append((f, "file must be {\"group\": %r, \"cases\": [...]}" % group))
            continue
        for c in data["cases"]:
            name = c.get("name", "?")
            if name in cases:
                problems.append((name, "duplicate case name"))
            elif not name.startswith(group + "/"):
                problems.append((name, "name must start with %s/" % group))
            cases[name] = c
    return cases, problems


def check_shape(c):
    """Field-level checks of one vector; returns (request_bytes, expected_fwd_or_None)."""
    for k in ("name", "description", "trusted", "request", "expect"):
        need(k in c, "missing field %s" % k)
    need(isinstance(c["trusted"], bool), "trusted must be a boolean")
    need(isinstance(c.get("max_depth", 128), int) and c.get("max_depth", 128) > 0, "bad max_depth")
    need(isinstance(c.get("max_body_bytes", 0), int) and c.get("max_body_bytes", 0) >= 0, "bad max_body_bytes")
    if "sender" in c or "trusted_senders" in c:
        # trusted is then the decision the rules reach for this sender.
        need(isinstance(c.get("trusted_senders"), list) and isinstance(c.get("sender"), dict),
             "sender and trusted_senders go together")
        snd = c["sender"]
        need(sorted(snd) == ["dns_san", "mtls", "source_address", "uri_san"]
             and snd["mtls"] in (True, False, None)
             and all(snd[k] is None or isinstance(snd[k], str) for k in ("uri_san", "dns_san", "source_address")),
             "sender needs mtls (bool or null) and uri_san, dns_san, source_address (string or null)")
    r = c["request"]
    need(isinstance(r.get("method"), str) and isinstance(r.get("path"), str) and r["path"].startswith("/"),
         "request needs method and path")
    need(isinstance(r.get("headers"), dict) and all(k == k.lower() for k in r["headers"]),
         "request.headers must be an object with lower-case names")
    req = one_body(r, "body", "body_base64", "request")
    e = c["expect"]
    need(e.get("outcome") in OUTCOMES, "bad outcome %r" % e.get("outcome"))
    need(e.get("reason") is None or e.get("reason") in REASONS, "bad reason %r" % e.get("reason"))
    need("reason" in e, "expect.reason must be present (null allowed)")
    ctr = e.get("counters")
    if "router_only" in c:
        check_router_only_shape(c)
        need(isinstance(ctr, dict) and sorted(ctr) == sorted(COUNTER_KEYS + ROUTER_COUNTER_KEYS)
             and isinstance(ctr["router_only_removed"], str),
             "counters of a router_only case hold the six keys and the two router-only keys")
        ctr = dict(ctr)
        ro_refused, ro_removed = ctr.pop("router_only_refused"), ctr.pop("router_only_removed")
        if e.get("action") == "reject" and ro_refused:
            need(ro_refused == 1 and ro_removed == "" and not any(ctr.values()),
                 "refused for router-only fields: counters must be router_only_refused=1 only")
            need(c["router_only"].get("untrusted") == "refuse" and not c["trusted"], "refused, but not untrusted under refuse")
            need(e.get("status") == 400 and e["outcome"] == "rejected" and e["reason"] is None,
                 "refused for router-only fields: 400, outcome rejected, reason null")
            found = router_only_found(c, req)
            need(found and e.get("router_only_found") == ",".join(f + "=1" for f in sorted(found)),
                 "router_only_found %r, but the request carries %r" % (e.get("router_only_found"), sorted(found)))
            return req, None
        need(ro_refused == 0, "router_only_refused for a request that is not refused")
        want = "" if c["trusted"] else ",".join(f + "=1" for f in sorted(router_only_found(c, req)))
        need(ro_removed == want, "router_only_removed %r, want %r" % (ro_removed, want))
    need(isinstance(ctr, dict) and sorted(ctr) in (sorted(COUNTER_KEYS), sorted(COUNTER_KEYS + GRPC_COUNTER_KEYS))
         and all(isinstance(v, int) and not isinstance(v, bool) for v in ctr.values()),
         "counters must hold exactly the six keys (and optionally the two gRPC keys) as integers")
    ctr = dict({k: 0 for k in GRPC_COUNTER_KEYS}, **ctr)
    need(c.get("grpc", "pass") in ("pass", "refuse"), "grpc must be pass or refuse")
    status = e.get("status")
    if e.get("action") == "reject" and is_grpc_ct(r["headers"].get("content-type")):
        # A request labelled gRPC is answered the gRPC way: HTTP 200 and the
        # grpc-status that stands for the rejection (or 7: refused).
        need(status == 200, "a rejected gRPC request is answered with HTTP 200")
        if c.get("grpc") == "refuse":
            need(e.get("grpc_status") == 7, "a refused gRPC request gets grpc-status 7")
            need(e["outcome"] == "refused" and e["reason"] is None, "refused: outcome refused, reason null")
            need(ctr == dict(zip(COUNTER_KEYS + GRPC_COUNTER_KEYS, [0, 0, 0, 0, 0, 0, 0, 1])),
                 "refused: counters must be grpc_refused=1 only")
            return req, None
        status = {v: k for k, v in GRPC_STATUS_OF.items()}.get(e.get("grpc_status"))
        need(status is not None, "grpc_status %r stands for no rejection" % e.get("grpc_status"))
    else:
        need("grpc_status" not in e, "grpc_status only for a gRPC request")
    if e.get("action") == "reject":
        need(status in (400, 413, 415), "reject needs status 400/413/415")
        need(e["outcome"] == "rejected" and e["reason"] is None, "reject: outcome rejected, reason null")
        need(ctr == dict(zip(COUNTER_KEYS + GRPC_COUNTER_KEYS, [0, 0, 0, 0, 0, 1, 0, 0])),
             "reject: counters must be rejected_bodies=1 only")
        for k in ("forwarded_body", "forwarded_body_base64", "unchanged", "canonical_hint"):
            need(k not in e, "reject must not have %s" % k)
        if status == 413:
            mb = c.get("max_body_bytes", 0) or 4 * 1024 * 1024
            need(len(req) > mb, "413 case body (%d bytes) is not over the limit %d" % (len(req), mb))
        if status == 415:
            ce = r["headers"].get("content-encoding", "identity")
            need(ce.strip().lower() != "identity", "415 case without a non-identity content-encoding")
        return req, None
    need(e.get("action") == "forward", "action must be forward or reject")
    need("status" not in e, "forward must not have status")
    fwd = one_body(e, "forwarded_body", "forwarded_body_base64", "expect")
    need(isinstance(e.get("unchanged"), bool), "forward needs unchanged")
    need(e["unchanged"] == (fwd == req), "unchanged=%s but forwarded %s request" % (
        e["unchanged"], "==" if fwd == req else "!="))
    need(("canonical_hint" in e) == (e["outcome"] == "admitted"), "canonical_hint only and always for admitted")
    return req, fwd


# ---------------------------------------------------------------------------
# Router-only fields: what the worker reads under each configured path.
# ---------------------------------------------------------------------------

def check_router_only_shape(c):
    ro, fields = c.get("router_only"), c.get("router_only_fields")
    need(isinstance(ro, dict) and set(ro) <= {"engines", "members", "headers", "untrusted"},
         "router_only must be an object of engines, members, headers, untrusted")
    need(isinstance(fields, list) and fields and all(isinstance(f, str) and f for f in fields)
         and len(set(fields)) == len(fields), "router_only_fields must be distinct names")
    for f in fields:
        # A member name never holds '-'; every header name here does.
        member = all(p and all(ch.isascii() and (ch.isalnum() or ch == "_") for ch in p) for p in f.split("."))
        header = "-" in f and all(ch.isascii() and (ch.islower() or ch.isdigit() or ch in "-_") for ch in f)
        need(member != header, "field %r is neither a member path nor a header name" % f)


def ro_split(c):
    fields = c["router_only_fields"]
    return [f for f in fields if "-" not in f], [f for f in fields if "-" in f]


def pairs_view(b):
    """json.loads keeping every member, duplicates included, in order."""
    return json.loads(b, object_pairs_hook=lambda ps: ("obj", ps))


def ro_prune(v, paths, prefix, found, top):
    """v (pairs_view) with the members at paths removed (and kv_hints at the
    top when top), recording the paths present in found."""
    if not (isinstance(v, tuple) and v[0] == "obj"):
        return v
    out = []
    for k, x in v[1]:
        p = prefix + k
        if p in paths or (top and k == "kv_hints"):
            if p in paths:
                found.add(p)
            continue
        if any(q.startswith(p + ".") for q in paths):
            x = ro_prune(x, paths, p + ".", found, False)
        out.append((k, x))
    return ("obj", out)


def router_only_found(c, req):
    """The fields the request carries: its member paths as json.loads reads
    the body, and its router-only headers."""
    members, headers = ro_split(c)
    found = set()
    if req and py_reads(req):
        ro_prune(pairs_view(req), set(members), "", found, False)
    names = {k.lower() for k in c["request"]["headers"]}
    return found | {h for h in headers if h in names}


def pv_dump(v):
    if isinstance(v, tuple) and v[0] == "obj":
        return "{" + ",".join(json.dumps(k) + ":" + pv_dump(x) for k, x in v[1]) + "}"
    if isinstance(v, list):
        return "[" + ",".join(pv_dump(x) for x in v) + "]"
    return json.dumps(v, allow_nan=True)


def check_router_only_seen(c, req, fwd):
    """Router-only case: an untrusted sender's forwarded body is the request
    as json.loads reads it, with every member at a configured path (and
    every kv_hints) gone, duplicates included; a trusted sender's is the
    request itself."""
    if c["trusted"]:
        need(fwd == req, "trusted: router-only fields must arrive unchanged")
        return
    members, _ = ro_split(c)
    want = ro_prune(pairs_view(req), set(members), "", set(), True)
    got = pairs_view(fwd)
    left = set()
    ro_prune(got, set(members), "", left, False)
    need(not left, "untrusted: the worker reads the router-only fields %r" % sorted(left))
    need(pv_dump(got) == pv_dump(want), "untrusted: the forwarded body is not the request without its router-only fields")


def expected_counters(c):
    e = c["expect"]
    want = {k: 0 for k in COUNTER_KEYS + GRPC_COUNTER_KEYS}
    o = e["outcome"]
    if o == "uninspected":
        want["grpc_uninspected"] = 1
    elif o == "stripped":
        want["untrusted"] = 1
    elif o == "admitted":
        want["admitted"] = 1
    elif o == "discarded":
        want[e["reason"]] = 1
    elif o == "rejected":
        want["rejected_bodies"] = 1
    return want


def check_forward_vector(c, req):
    """Self-consistency of a forward vector: outcome vs. request, and the
    expected bytes follow from the request by the removal/replacement rule."""
    e = c["expect"]
    o, trusted = e["outcome"], c["trusted"]
    ctr = dict({k: 0 for k in GRPC_COUNTER_KEYS}, **e["counters"])
    for k in ROUTER_COUNTER_KEYS:  # checked by check_shape
        ctr.pop(k, None)
    need(ctr == expected_counters(c), "counters %r do not match outcome %s" % (e["counters"], o))
    if o == "uninspected":
        # The rule: a gRPC content type, a gRPC message prefix, and a body
        # that json.loads cannot read, so the worker sees no hint in it.
        need(c.get("grpc", "pass") == "pass", "uninspected under \"grpc\": \"refuse\"")
        need(is_grpc_ct(c["request"]["headers"].get("content-type")), "uninspected without a gRPC content type")
        need(len(req) >= 5 and req[0] in (0, 1), "uninspected without a gRPC message prefix")
        need(not py_reads(req), "uninspected, but json.loads reads the body")
        need(e["reason"] is None, "uninspected has no reason")
        return req
    want_reason = {"stripped": "untrusted"}.get(o)
    if o == "discarded":
        need(trusted and e["reason"] in REASONS - {"untrusted"}, "discarded needs trusted and a hint reason")
    else:
        need(e["reason"] == want_reason, "reason must be %r for %s" % (want_reason, o))
    need(o != "stripped" or not trusted, "stripped is an untrusted outcome")
    need(o != "admitted" or trusted, "admitted is a trusted outcome")
    if req == b"":
        # No body at all: nothing to inspect, so it is forwarded as it is.
        need(o == "no_hint", "an empty body has no hint to act on")
        return req
    _, _, hints = hint_members(req)
    orig = worker_view(req)
    nulls = [orig_hint_is_null(req, m) for m in hints]
    if o == "no_hint":
        need(not hints, "outcome no_hint but the request has %d top-level kv_hints members" % len(hints))
        return req
    need(hints, "outcome %s but the request has no top-level kv_hints member" % o)
    # json.loads keeps the last of duplicate members: that one decides.
    if o == "null_hint":
        need(nulls[-1], "null_hint but the last kv_hints member is not null")
        if trusted and len(hints) == 1:
            return req
        return remove_hints(req)
    if o == "stripped":
        need(not nulls[-1], "stripped but the last kv_hints member is null")
        return remove_hints(req)
    if o == "discarded":
        need(not nulls[-1], "discarded but the last kv_hints member is null")
        if len(hints) > 1:
            need(e["reason"] == "malformed", "several kv_hints members must be discarded as malformed")
        if e["reason"] == "oversized":
            check_oversized(c, req)
        return remove_hints(req)
    # admitted
    need(len(hints) == 1, "admitted needs exactly one kv_hints member")
    can = e["canonical_hint"]
    prefix, text, _ = hint_members(req)
    raw = text[hints[0].value_start:hints[0].value_end]
    need(canonical_of(raw) == can, "canonical_hint is not the canonical compact form of the request's hint")
    need(len(can.encode("utf-8")) <= 65536, "canonical_hint longer than 65,536 bytes")
    need(same(json.loads(can), orig["kv_hints"]), "canonical_hint does not parse to the request's hint value")
    # What the worker measures: its own compact json.dumps of what it read.
    need(worker_dumps(orig["kv_hints"]) == can, "canonical_hint is not what the worker's json.dumps writes for the hint")
    return replace_hint(req, can)


def worker_dumps(v):
    """The worker's compact re-serialization of a hint it read, which it
    measures against the 65,536-byte bound."""
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)


def check_oversized(c, req):
    """An envelope discarded as oversized is over the bound as the worker
    measures it, when the worker reads it as kvgate does (no duplicate
    member, which json.loads would drop)."""
    _, text, hints = hint_members(req)
    if len(hints) != 1:
        return
    raw = text[hints[0].value_start:hints[0].value_end]
    dup = []

    def pairs(ps):
        if len({k for k, _ in ps}) != len(ps):
            dup.append(True)
        return dict(ps)
    v = json.loads(raw, object_pairs_hook=pairs)
    if not dup:
        size = len(worker_dumps(v).encode("utf-8", "surrogatepass"))
        need(size > 65536, "discarded as oversized, but the worker measures %d bytes" % size)


def orig_hint_is_null(req, m):
    prefix, text, _ = scan_top(req)
    return text[m.value_start:m.value_end] == "null"


def check_worker_sees(c, req, fwd):
    """What the worker reads from `fwd` (bytes) is what the vector decided."""
    e = c["expect"]
    o, trusted = e["outcome"], c["trusted"]
    if o == "uninspected":
        need(fwd == req, "uninspected: the forwarded body is not the request body")
        need(not py_reads(fwd), "uninspected: json.loads reads the forwarded body")
        return
    if fwd == b"":
        # The worker gets no body, so no hint; it answers that itself.
        need(req == b"" and o == "no_hint", "an empty body forwarded for a non-empty request")
        return
    try:
        seen = worker_view(fwd)
    except Exception as ex:
        raise Fail("json.loads of the forwarded body fails: %s: %s" % (type(ex).__name__, ex))
    orig = worker_view(req)
    has = isinstance(seen, dict) and "kv_hints" in seen
    _, _, fhints = hint_members(fwd)
    if not trusted:
        need(not has and not fhints, "untrusted: the worker sees a kv_hints member")
    elif o == "admitted":
        need(has, "admitted: the worker sees no kv_hints")
        need(len(fhints) == 1, "admitted: forwarded body has %d top-level kv_hints members" % len(fhints))
        can = e["canonical_hint"]
        need(same(seen["kv_hints"], json.loads(can)), "admitted: kv_hints the worker sees != canonical_hint")
        prefix, text, _ = hint_members(fwd)
        raw = text[fhints[0].value_start:fhints[0].value_end].encode("utf-8", "surrogatepass")
        need(raw == can.encode("utf-8"), "admitted: forwarded member value bytes != canonical_hint")
        key = text[fhints[0].key_start:fhints[0].key_end]
        need(key == '"kv_hints"', "admitted: forwarded under the key %s, not the literal \"kv_hints\"" % key)
    elif o == "null_hint" and len(hint_members(req)[2]) == 1:
        need(has and seen["kv_hints"] is None and len(fhints) == 1, "trusted null_hint: worker must see kv_hints = None")
    else:
        need(not has and not fhints, "%s: the worker sees a kv_hints member" % o)
    a = dict(seen) if isinstance(seen, dict) else seen
    b = dict(orig) if isinstance(orig, dict) else orig
    if isinstance(a, dict):
        a.pop("kv_hints", None)
    if isinstance(b, dict):
        b.pop("kv_hints", None)
        if "router_only" in c and not trusted:
            for p in ro_split(c)[0]:
                drop_path(b, p.split("."))
    need(same(a, b), "the forwarded body differs from the request outside kv_hints (as json.loads sees it)")


def drop_path(d, names):
    """Removes the member at names from the dict view d (copying what it
    changes), as untrusted removal does for the member json.loads keeps."""
    if not isinstance(d, dict) or names[0] not in d:
        return
    if len(names) == 1:
        del d[names[0]]
        return
    if isinstance(d[names[0]], dict):
        d[names[0]] = dict(d[names[0]])
        drop_path(d[names[0]], names[1:])


def check_vector(c):
    req, fwd = check_shape(c)
    if fwd is None:
        return
    rebuilt = check_forward_vector(c, req)
    if "router_only" in c:
        # The router-only removal is checked as the worker reads it.
        check_router_only_seen(c, req, fwd)
    else:
        need(rebuilt == fwd, "expected forwarded bytes do not follow from the request by the removal/replacement rule")
    check_worker_sees(c, req, fwd)


def check_line(c, line):
    mode = line.get("mode")
    need(mode in ("trusted", "untrusted"), "mode must be trusted or untrusted")
    need((mode == "trusted") == c["trusted"], "ran in %s mode but the vector is %s" % (
        mode, "trusted" if c["trusted"] else "untrusted"))
    status = line.get("status")
    got = base64.b64decode(line.get("body_base64") or "", validate=True)
    e = c["expect"]
    req, fwd = check_shape(c)
    if e["action"] == "reject":
        need(status == e["status"], "status %r, want %d" % (status, e["status"]))
        if got:
            try:
                err = json.loads(got)["error"]
            except Exception:
                raise Fail("reply body is not an OpenAI-style JSON error: %r" % got[:200])
            need(isinstance(err, dict) and isinstance(err.get("message"), str)
                 and err.get("type") == "invalid_request_error" and err.get("code") == e["status"],
                 "reply error must be {message: str, type: invalid_request_error, code: %d}: %r" % (e["status"], got[:200]))
        return
    need(status == 200, "status %r, want 200 (forwarded)" % (status,))
    check_worker_sees(c, req, got)
    if got != fwd:
        n = next((i for i in range(min(len(got), len(fwd))) if got[i] != fwd[i]), min(len(got), len(fwd)))
        raise Fail("forwarded bytes differ from the vector at byte %d (got %d bytes, want %d): got %r want %r" % (
            n, len(got), len(fwd), got[max(0, n - 20):n + 40], fwd[max(0, n - 20):n + 40]))


def read_lines(path):
    files = sorted(glob.glob(os.path.join(path, "*.jsonl"))) if os.path.isdir(path) else [path]
    if not files:
        raise Fail("no *.jsonl files in %s" % path)
    for f in files:
        with open(f, "rb") as fh:
            for n, raw in enumerate(fh, 1):
                if raw.strip():
                    yield "%s:%d" % (f, n), raw


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--forwarded", metavar="DIR_OR_FILE", help="JSON lines written by a host under test (mode B)")
    ap.add_argument("--vectors", default=DEFAULT_VECTORS, help="vector directory (default: %(default)s)")
    ap.add_argument("--require-all", action="store_true", help="mode B: fail when a vector has no line")
    args = ap.parse_args()

    cases, problems = load_vectors(args.vectors)
    failures = list(problems)
    passed = 0
    skipped = 0
    if args.forwarded is None:
        for name in sorted(cases):
            try:
                check_vector(cases[name])
                passed += 1
            except Fail as ex:
                failures.append((name, str(ex)))
            except Exception as ex:
                failures.append((name, "%s: %s" % (type(ex).__name__, ex)))
    else:
        seen = set()
        try:
            lines = list(read_lines(args.forwarded))
        except (Fail, OSError) as ex:
            lines = []
            failures.append((args.forwarded, str(ex)))
        for where, raw in lines:
            try:
                line = json.loads(raw)
                name = line.get("name")
            except Exception as ex:
                failures.append((where, "not a JSON line: %s" % ex))
                continue
            label = "%s (%s)" % (name, where)
            if name not in cases:
                failures.append((label, "no such vector"))
                continue
            seen.add(name)
            if "skipped" in line:
                # The host could not run this case; the runner said why.
                skipped += 1
                continue
            try:
                check_line(cases[name], line)
                passed += 1
            except Fail as ex:
                failures.append((label, str(ex)))
            except Exception as ex:
                failures.append((label, "%s: %s" % (type(ex).__name__, ex)))
        missing = sorted(set(cases) - seen)
        if missing:
            msg = "%d of %d vectors have no line" % (len(missing), len(cases))
            if args.require_all:
                failures.extend((m, "no line for this vector") for m in missing)
            else:
                print("note: " + msg + " (first: %s)" % ", ".join(missing[:5]))
    for where, msg in failures:
        print("FAIL %s: %s" % (where, msg))
    if args.forwarded is not None and skipped:
        print("%d passed, %d failed, %d skipped" % (passed, len(failures), skipped))
    else:
        print("%d passed, %d failed" % (passed, len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    # Bodies nest up to thousands of levels; json.loads recurses in C.
    sys.setrecursionlimit(100000)
    threading.stack_size(512 * 1024 * 1024)
    rc = []
    t = threading.Thread(target=lambda: rc.append(main()))
    t.start()
    t.join()
    sys.exit(rc[0] if rc else 2)
