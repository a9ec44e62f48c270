#!/usr/bin/env python3
"""Generate the kvgate conformance vectors (tests/vectors/*.json).

Python 3.11, standard library only.  Every expectation is derived here from
docs/spec.md (admission, untrusted mode, reading a body) *by construction*: a request body is assembled from
pieces (head, members with their separators, tail), and the forwarded body is
assembled from the same pieces with hint members dropped or their value
replaced by the canonical bytes.  Nothing here runs or reads the Go code.

As a guard against typos in the hand-written verdicts, a small model of the
admission rules (written from the spec) must agree with each stated verdict,
and Python's json.loads must accept every forwarded request and reject every
400 request (except the few where the spec is deliberately stricter than
Python, which are flagged).

Run:  python3 tests/vectors/generate.py     (rewrites the files; deterministic)
"""

import base64
import binascii
import gzip
import json
import math
import os
import re
import struct
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))

COMPACT_LIMIT = 65536          # docs/spec.md, Admission rules, rule 4
MIB = 1 << 20
DEFAULT_DEPTH = 128
BOM = b"\xef\xbb\xbf"
COUNTER_KEYS = ["untrusted", "unknown_version", "oversized", "malformed",
                "admitted", "rejected_bodies"]
# Present in the cases of the grpc group only; absent means 0.
GRPC_COUNTER_KEYS = ["grpc_uninspected", "grpc_refused"]
# Present in the cases of the router-only group only: refusals, and the
# fields removed as "field=n,..." in name order.
ROUTER_COUNTER_KEYS = ["router_only_refused", "router_only_removed"]
CHAT = "/v1/chat/completions"
JSON_CT = {"content-type": "application/json"}

# The reference envelope of docs/spec.md (already canonical).
REF = ('{"protocol_version":"0.1","message_id":"msg-123","actions":[{"action_id":"a1",'
       '"action_type":"kv.fetch","action_version":"1.0","payload":{"source_control_endpoint":'
       '"tcp://127.0.0.1:23280","block_hashes":[11,22]}}]}')
assert len(REF.encode("utf-8")) == 213, len(REF.encode("utf-8"))


# ---------------------------------------------------------------------------
# A literal-preserving view of JSON text, used for canonical bytes and for the
# admission model.
# ---------------------------------------------------------------------------

class Lit:
    """A number literal or NaN/Infinity constant as received (see py_number
    for how the worker writes it back)."""
    __slots__ = ("text", "kind")

    def __init__(self, text, kind):
        self.text, self.kind = text, kind


class Obj(list):
    """An object as the list of its (decoded key, value) pairs, in order."""


def parse_raw(text):
    return json.loads(text, object_pairs_hook=Obj,
                      parse_int=lambda s: Lit(s, "int"),
                      parse_float=lambda s: Lit(s, "float"),
                      parse_constant=lambda s: Lit(s, "const"))


def py_number(x):
    """A number literal as the worker writes it back (docs/spec.md, "Compact
    size"): json.loads then json.dumps.  An integer is exact (-0 is 0), a
    float is float.__repr__ of the double it reads as (1E2 is 100.0, 1e15 is
    1000000000000000.0, 1e16 is 1e+16, 1e-400 is 0.0) or Infinity and
    -Infinity past the largest double; NaN and Infinity stay."""
    if x.kind == "int":
        return str(int(x.text))
    if x.kind == "float":
        return json.dumps(float(x.text))
    return x.text


def jstr(s):
    # Python's encoder with ensure_ascii=False escapes exactly " \\ and the
    # C0 controls (\b \f \n \r \t short, others \u00xx lowercase) and leaves
    # everything else raw, including '/', DEL, U+2028 and non-ASCII: this is
    # the minimal escaping of docs/spec.md, "Compact size".
    return json.dumps(s, ensure_ascii=False)


def canon(v):
    """Canonical compact encoding (iterative: works at any depth)."""
    out = []
    stack = [("v", v)]
    while stack:
        kind, x = stack.pop()
        if kind == "s":
            out.append(x)
            continue
        if isinstance(x, Obj):
            items = [("s", "{")]
            for i, (k, val) in enumerate(x):
                items.append(("s", ("," if i else "") + jstr(k) + ":"))
                items.append(("v", val))
            items.append(("s", "}"))
            stack.extend(reversed(items))
        elif isinstance(x, list):
            items = [("s", "[")]
            for i, val in enumerate(x):
                if i:
                    items.append(("s", ","))
                items.append(("v", val))
            items.append(("s", "]"))
            stack.extend(reversed(items))
        elif isinstance(x, str):
            out.append(jstr(x))
        elif isinstance(x, Lit):
            out.append(py_number(x))
        elif x is True:
            out.append("true")
        elif x is False:
            out.append("false")
        elif x is None:
            out.append("null")
        else:
            raise TypeError(x)
    return "".join(out)


def pretty(text, indent=2, nl="\n"):
    """Pretty-print JSON text (keys, strings, literals kept) with indentation."""
    v = parse_raw(text)

    def rec(x, lvl):
        pad = " " * (indent * (lvl + 1))
        end = " " * (indent * lvl)
        if isinstance(x, Obj):
            if not x:
                return "{}"
            return "{" + nl + ("," + nl).join(pad + jstr(k) + ": " + rec(val, lvl + 1) for k, val in x) + nl + end + "}"
        if isinstance(x, list):
            if not x:
                return "[]"
            return "[" + nl + ("," + nl).join(pad + rec(val, lvl + 1) for val in x) + nl + end + "]"
        if isinstance(x, Lit):
            return x.text  # literals as written: pretty-printing is the sender's
        return canon(x)
    return rec(v, 0)


SURROGATE = re.compile("[\ud800-\udfff]")
I64_MIN, U64_MAX = -(2 ** 63), 2 ** 64 - 1


def structure_ok(v, max_depth):
    """docs/spec.md rule 5 ("Structure") on a parsed envelope (an Obj)."""
    def get(o, name):
        vals = [x for k, x in o if k == name]
        return vals[-1] if vals else KeyError

    def nonempty_str(x):
        return isinstance(x, str) and x != ""

    if not nonempty_str(get(v, "message_id")):
        return False
    acts = get(v, "actions")
    if not isinstance(acts, list) or isinstance(acts, Obj):
        return False
    for a in acts:
        if not isinstance(a, Obj):
            return False
        for f in ("action_id", "action_type", "action_version"):
            if not nonempty_str(get(a, f)):
                return False
        if not isinstance(get(a, "payload"), Obj):
            return False
    stack = [(v, 1)]
    while stack:
        x, d = stack.pop()
        if isinstance(x, Obj):
            if d > max_depth:
                return False
            keys = [k for k, _ in x]
            if len(set(keys)) != len(keys):
                return False
            for k, val in x:
                if SURROGATE.search(k):
                    return False
                stack.append((val, d + 1))
        elif isinstance(x, list):
            if d > max_depth:
                return False
            stack.extend((val, d + 1) for val in x)
        elif isinstance(x, str):
            if SURROGATE.search(x):
                return False
        elif isinstance(x, Lit):
            if x.kind == "const":
                return False
            if x.kind == "int" and not (I64_MIN <= int(x.text) <= U64_MAX):
                return False
            if x.kind == "float" and not math.isfinite(float(x.text)):
                return False
    return True


def model_admit(raw_text, max_depth=DEFAULT_DEPTH):
    """Independent model of docs/spec.md's rules 1-6 for one hint value.
    Returns (verdict, canonical-or-None)."""
    v = parse_raw(raw_text)
    if v is None:
        return "null", None
    if not isinstance(v, Obj):
        return "malformed", None
    pvs = [x for k, x in v if k == "protocol_version"]
    if not pvs:
        return "malformed", None
    assert len(pvs) == 1, "duplicate protocol_version is deliberately not covered"
    if not isinstance(pvs[0], str):
        return "malformed", None
    if pvs[0] != "0.1":
        return "unknown_version", None
    # Rule 4's bound on the work does not count whitespace, and never
    # decides on its own: a value is oversized by its compact size only.
    c = canon(v)
    if len(c.encode("utf-8", "surrogatepass")) > COMPACT_LIMIT:
        return "oversized", None
    if not structure_ok(v, max_depth):
        return "malformed", None
    return "admitted", c


# ---------------------------------------------------------------------------
# Bodies built from pieces.
# ---------------------------------------------------------------------------

class M:
    """One top-level member: sep (text before the key when not the first
    member), key (raw, with quotes and escapes), colon (raw text from the end
    of the key to the start of the value) and value (raw)."""

    def __init__(self, key, value, colon=":", sep=","):
        self.key, self.value, self.colon, self.sep = key, value, colon, sep

    @property
    def is_hint(self):
        return json.loads(self.key) == "kv_hints"


def K(name, value, **kw):
    return M(json.dumps(name), value, **kw)


def H(value, key='"kv_hints"', **kw):
    m = M(key, value, **kw)
    assert m.is_hint, key
    return m


class Body:
    def __init__(self, members, head="{", tail="}", prefix=b""):
        self.members, self.head, self.tail, self.prefix = list(members), head, tail, prefix

    def render(self, keep=None, replace=None):
        """The body text; replace maps id(member) to a new value, and such a
        member goes out under the literal key "kv_hints" (DESIGN.md 3)."""
        members = self.members if keep is None else keep
        parts = [self.head]
        for i, m in enumerate(members):
            if i:
                parts.append(m.sep)
            if replace and id(m) in replace:
                parts.append('"kv_hints"' + m.colon + replace[id(m)])
                continue
            parts.append(m.key + m.colon)
            parts.append(m.value)
        parts.append(self.tail)
        # surrogatepass: a surrogate in the text stands for its three-byte
        # encoding (ED A0..BF 80..BF), which json.loads on bytes reads.
        return self.prefix + "".join(parts).encode("utf-8", "surrogatepass")


def B(*members, **kw):
    return Body(members, **kw)


def MODEL(**kw):
    return K("model", '"m"', **kw)


def MSGS(**kw):
    return K("messages", '[{"role":"user","content":"hi"}]', **kw)


def std(hint_value, **hkw):
    """The usual chat body with the hint in the middle."""
    return B(MODEL(), H(hint_value, **hkw), MSGS())


# ---------------------------------------------------------------------------
# Envelope text builders.
# ---------------------------------------------------------------------------

DROP = object()
PAYLOAD = '{"source_control_endpoint":"tcp://127.0.0.1:23280","block_hashes":[11,22]}'
ACTION_BASE = [('"action_id"', '"a1"'), ('"action_type"', '"kv.fetch"'),
               ('"action_version"', '"1.0"'), ('"payload"', PAYLOAD)]


def jobj(pairs):
    return "{" + ",".join(k + ":" + v for k, v in pairs) + "}"


def build(base, over=None, extra=(), first=()):
    out = list(first)
    for k, v in base:
        name = json.loads(k)
        if over and name in over:
            if over[name] is DROP:
                continue
            v = over[name]
        out.append((k, v))
    out.extend(extra)
    return jobj(out)


def action(over=None, extra=(), **kw):
    return build(ACTION_BASE, over, extra, **kw)


def env(over=None, extra=(), actions=None, **kw):
    acts = "[" + action() + "]" if actions is None else actions
    base = [('"protocol_version"', '"0.1"'), ('"message_id"', '"msg-123"'), ('"actions"', acts)]
    return build(base, over, extra, **kw)


def env_payload(payload):
    return env(actions="[" + action({"payload": payload}) + "]")


assert env() == REF


# ---------------------------------------------------------------------------
# Case collection.
# ---------------------------------------------------------------------------

GROUPS = {}
NAMES = set()


def b64(b):
    return base64.b64encode(b).decode("ascii")


def body_field(b, text_key, b64_key):
    try:
        t = b.decode("utf-8")
    except UnicodeDecodeError:
        return {b64_key: b64(b)}
    if "\ufeff" in t or "\x00" in t:
        return {b64_key: b64(b)}
    return {text_key: t}


def py_accepts(b):
    try:
        json.loads(b)
        return True
    except Exception:
        return False


def counters(**kw):
    c = {k: 0 for k in COUNTER_KEYS}
    for k, v in kw.items():
        assert k in COUNTER_KEYS or k in GRPC_COUNTER_KEYS or k in ROUTER_COUNTER_KEYS, k
        c[k] = v
    return c


def add(group, short, desc, trusted, req, expect, method="POST", path=CHAT,
        headers=None, max_depth=None, max_body=None, grpc=None, router_only=None):
    name = group + "/" + short
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", short), short
    assert name not in NAMES, name
    assert "\n" not in desc
    NAMES.add(name)
    case = {"name": name, "description": desc, "trusted": trusted}
    if max_depth is not None:
        case["max_depth"] = max_depth
    if max_body is not None:
        case["max_body_bytes"] = max_body
    if grpc is not None:
        case["grpc"] = grpc
    if router_only is not None:
        case["router_only"] = router_only
        case["router_only_fields"] = ro_fields(router_only)
    r = {"method": method, "path": path,
         "headers": dict(JSON_CT if headers is None else headers)}
    r.update(body_field(req, "body", "body_base64"))
    case["request"] = r
    if group == "grpc":
        expect["counters"] = {**{k: 0 for k in COUNTER_KEYS + GRPC_COUNTER_KEYS}, **expect["counters"]}
    elif group == "router-only":
        expect["counters"] = {**{k: 0 for k in COUNTER_KEYS}, "router_only_refused": 0, "router_only_removed": "",
                              **expect["counters"]}
    else:
        assert not set(expect["counters"]) & set(GRPC_COUNTER_KEYS), name
    case["expect"] = expect
    GROUPS.setdefault(group, []).append(case)


def forward_expect(req, fwd, outcome, reason=None, canonical=None, ctr=None):
    e = {"action": "forward"}
    e.update(body_field(fwd, "forwarded_body", "forwarded_body_base64"))
    e["unchanged"] = fwd == req
    e["outcome"] = outcome
    e["reason"] = reason
    if canonical is not None:
        e["canonical_hint"] = canonical
    e["counters"] = ctr or counters()
    return e


def hint_case(group, short, desc, trusted, body, verdict=None, canonical=None,
              max_depth=None, **http):
    """A forwarded case on a constructed object body.

    verdict: for a trusted body with exactly one kv_hints member, the verdict of
    docs/spec.md's rules ("admitted", "null", "malformed", "unknown_version",
    "oversized"); it must agree with the model.  For other bodies it may be
    given as the expected outcome ("no_hint", "null_hint", "stripped",
    "discarded") and is checked."""
    req = body.render()
    assert py_accepts(req), name_of(group, short)
    hints = [m for m in body.members if m.is_hint]
    others = [m for m in body.members if not m.is_hint]
    # What the worker reads: with duplicates, json.loads keeps the last one.
    last_null = bool(hints) and parse_raw(hints[-1].value) is None
    depth = DEFAULT_DEPTH if max_depth is None else max_depth
    if not hints:
        exp = forward_expect(req, req, "no_hint")
        check = "no_hint"
    elif not trusted:
        fwd = body.render(keep=others)
        if not last_null:
            exp = forward_expect(req, fwd, "stripped", "untrusted", ctr=counters(untrusted=1))
            check = "stripped"
        else:
            exp = forward_expect(req, fwd, "null_hint")
            check = "null_hint"
    elif len(hints) >= 2:
        # Every member is removed; counted as malformed unless the worker
        # would have read null.
        fwd = body.render(keep=others)
        if last_null:
            exp = forward_expect(req, fwd, "null_hint")
            check = "null_hint"
        else:
            exp = forward_expect(req, fwd, "discarded", "malformed", ctr=counters(malformed=1))
            check = "discarded"
    else:
        got, can = model_admit(hints[0].value, depth)
        assert verdict is not None, name_of(group, short)
        assert verdict == got, (name_of(group, short), verdict, got)
        if got == "null":
            exp = forward_expect(req, req, "null_hint")
        elif got == "admitted":
            if canonical is not None:
                assert canonical == can, (name_of(group, short), canonical, can)
            assert len(can.encode("utf-8")) <= COMPACT_LIMIT
            fwd = body.render(replace={id(hints[0]): can})
            exp = forward_expect(req, fwd, "admitted", None, can, counters(admitted=1))
        else:
            fwd = body.render(keep=others)
            exp = forward_expect(req, fwd, "discarded", got, ctr=counters(**{got: 1}))
        check = None
    if check is not None and verdict is not None:
        assert verdict == check, (name_of(group, short), verdict, check)
    add(group, short, desc, trusted, req, exp, max_depth=max_depth, **http)
    return exp


def name_of(group, short):
    return group + "/" + short


def both(group, short, desc, body, verdict, canonical=None, **kw):
    """The same body in trusted mode (with the given verdict) and untrusted
    mode (stripped, or null_hint when every hint is null)."""
    hint_case(group, short + "-trusted", desc + " (trusted)", True, body, verdict, canonical, **kw)
    hint_case(group, short + "-untrusted", desc + " (untrusted)", False, body, **kw)


def raw_forward(group, short, desc, trusted, req, **http):
    """A body forwarded unchanged with outcome no_hint (non-object tops etc.)."""
    assert py_accepts(req), name_of(group, short)
    add(group, short, desc, trusted, req, forward_expect(req, req, "no_hint"), **http)


# A request labelled gRPC gets the filter's answers the gRPC way: HTTP 200
# with the grpc-status that stands for the HTTP status (DESIGN.md 4).
GRPC_STATUS_OF = {400: 3, 413: 8, 415: 12}


def reject(group, short, desc, trusted, req, status=400, python_accepts=False, **http):
    if isinstance(req, str):
        req = req.encode("utf-8")
    if status == 400:
        # The body really is bad for Python's json too, unless flagged as a
        # place where the spec is stricter than the worker.
        assert py_accepts(req) == python_accepts, (name_of(group, short), python_accepts)
    exp = {"action": "reject", "status": status, "outcome": "rejected", "reason": None,
           "counters": counters(rejected_bodies=1)}
    if is_grpc_ct((http.get("headers") or {}).get("content-type", "")):
        exp = {"action": "reject", "status": 200, "grpc_status": GRPC_STATUS_OF[status], "outcome": "rejected",
               "reason": None, "counters": counters(rejected_bodies=1)}
    add(group, short, desc, trusted, req, exp, **http)


# ---------------------------------------------------------------------------
# Padding helpers for exact sizes.
# ---------------------------------------------------------------------------

def hash20(i):
    """A deterministic 20-digit decimal u64 (10^19 .. 2^64-1)."""
    return str(10 ** 19 + (i * 0x9E3779B97F4A7C15 + 0x1234567) % (U64_MAX - 10 ** 19 + 1))


def digits(n, i=0):
    """A deterministic n-digit decimal (n <= 19) with a non-zero first digit."""
    s = str((i * 7919 + 104729) * 982451653)
    s = (s * 4)[:n]
    return ("7" + s[1:]) if s[0] == "0" else s


def env_hashes(target, pretty_print=False):
    """An envelope whose block_hashes array is grown so that its compact size
    is exactly `target` bytes."""
    head = ('{"protocol_version":"0.1","message_id":"msg-size","actions":[{"action_id":"a1",'
            '"action_type":"kv.fetch","action_version":"1.0","payload":{"source_control_endpoint":'
            '"tcp://127.0.0.1:23280","block_hashes":[')
    tail = ']}}]}'
    hashes = []
    cur = len(head) + len(tail)
    while cur + 20 + (1 if hashes else 0) <= target:
        cur += 20 + (1 if hashes else 0)
        hashes.append(hash20(len(hashes)))
    r = target - cur
    if r == 1:
        hashes.pop()
        hashes += [digits(10, 1), digits(10, 2)]
    elif r >= 2:
        hashes.append(digits(r - 1, 3))
    text = head + ",".join(hashes) + tail
    assert len(text.encode()) == target, (len(text), target)
    return pretty(text) if pretty_print else text


def env_note(target, unit="x", unit_canon_len=1, unit_raw=None, where="envelope"):
    """An envelope with an extra string member "note" padded so that its
    compact size is exactly `target`.  `unit` is the canonical text of one
    padding character (its canonical byte length unit_canon_len); unit_raw is
    how it is written in the raw value (default: same as canonical)."""
    unit_raw = unit if unit_raw is None else unit_raw

    def mk(pad_raw):
        if where == "envelope":
            return env(extra=[('"note"', '"' + pad_raw + '"')])
        return env(actions="[" + action(extra=[('"note"', '"' + pad_raw + '"')]) + "]")
    base = len(mk("").encode())
    need = target - base
    n, rest = divmod(need, unit_canon_len)
    raw = unit_raw * n + "y" * rest
    text = mk(raw)
    can = canon(parse_raw(text))
    assert len(can.encode()) == target, (len(can.encode()), target)
    return text


def deep_arrays(n, inner="1"):
    return "[" * n + inner + "]" * n


def deep_objects(n, inner="1"):
    return '{"n":' * n + inner + "}" * n


# ---------------------------------------------------------------------------
# The cases.
# ---------------------------------------------------------------------------

def gen_admission():
    g = "admission"
    pr = pretty(REF)
    hint_case(g, "reference-compact-unchanged",
              "reference envelope already canonical: admitted, body bytes unchanged", True,
              std(REF), "admitted", REF)
    hint_case(g, "reference-pretty-rewritten",
              "pretty-printed reference envelope is replaced by its 213 canonical bytes", True,
              std(pr), "admitted", REF)
    hint_case(g, "only-member", "kv_hints is the only member", True,
              B(H(pr)), "admitted", REF)
    hint_case(g, "first-member", "kv_hints is the first member", True,
              B(H(pr), MODEL(), MSGS()), "admitted", REF)
    hint_case(g, "last-member", "kv_hints is the last member", True,
              B(MODEL(), MSGS(), H(pr)), "admitted", REF)
    hint_case(g, "whitespace-around-colon-kept",
              "whitespace between key, colon and value and around commas is preserved", True,
              B(K("model", '"m"', colon=" : "), H(pr, colon="  :\t", sep=" ,\n "),
                K("stream", "false", sep="\r\n,  "), head="\n {  ", tail=" \n}\n"),
              "admitted", REF)
    hint_case(g, "pretty-body-pretty-hint",
              "whole body pretty-printed with indent 2; only the hint value bytes change", True,
              B(K("model", '"m"', colon=": "), H(pretty(REF, 2).replace("\n", "\n  "), colon=": ", sep=",\n  "),
                K("stream", "false", colon=": ", sep=",\n  "), head="{\n  ", tail="\n}\n"),
              "admitted", REF)
    hint_case(g, "crlf-tabs-inside-envelope", "CR LF and tab whitespace inside the envelope is dropped", True,
              std(pretty(REF, 1, "\r\n").replace(" ", "\t")), "admitted", REF)
    e = env(actions="[]")
    hint_case(g, "empty-actions", "an empty actions array is admitted", True, std(e), "admitted", e)
    e = env(actions="[" + action() + "," + action({"action_id": '"a2"'}) + "," + action({"action_id": '"a3"', "payload": "{}"}) + "]")
    hint_case(g, "three-actions", "several actions admitted in order", True, std(pretty(e)), "admitted", e)
    e = env(actions="[" + action() + "," + action() + "]")
    hint_case(g, "repeated-action-id", "two actions with the same action_id are both kept", True,
              std(e), "admitted", e)
    e = env(extra=[('"trace"', '{"id":"t-1","tags":["a","b"],"n":3}'), ('"priority"', "7"),
                   ('"flag"', "true"), ('"nothing"', "null"), ('"ratio"', "0.25"), ('"list"', "[1,[2,[3]]]")])
    hint_case(g, "extra-envelope-members", "extra members at envelope level kept untouched, in order", True,
              std(pretty(e)), "admitted", e)
    e = env(actions="[" + action(extra=[('"hint_source"', '"router-7"'), ('"weights"', "[0.5,1e-3]"),
                                         ('"opts"', '{"x":null,"y":false}')]) + "]")
    hint_case(g, "extra-action-members", "extra members at action level kept, in order (1e-3 written 0.001, as Python does)", True,
              std(pretty(e)), "admitted", e.replace("1e-3", "0.001"))
    e = env(actions="[" + action({"action_type": '"vendor.unknown"'}) + "]")
    hint_case(g, "unknown-action-type", "an unknown action_type is kept (actions are opaque)", True,
              std(e), "admitted", e)
    e = env(actions="[" + action({"action_version": '"99.7-beta"'}) + "]")
    hint_case(g, "unknown-action-version", "an unknown action_version is kept", True, std(e), "admitted", e)
    e = env(actions="[" + action({"payload": '{"anything":[{"goes":"here"}],"n":-0}'}) + "]")
    hint_case(g, "opaque-payload", "payload content is not interpreted (-0 is the integer 0 to Python)", True, std(e), "admitted",
              e.replace('"n":-0', '"n":0'))
    e = env(actions="[" + action({"payload": "{}"}) + "]")
    hint_case(g, "empty-payload", "an empty payload object is admitted", True, std(e), "admitted", e)
    e = ('{"actions":[{"payload":{"block_hashes":[1]},"action_version":"1.0","action_type":"kv.fetch",'
         '"action_id":"z"}],"message_id":"m","protocol_version":"0.1"}')
    hint_case(g, "reversed-key-order", "members in an unusual order are kept in received order", True,
              std(pretty(e)), "admitted", e)
    hint_case(g, "nan-in-prompt-admitted", "NaN and Infinity outside the hint are accepted and kept byte-identical", True,
              B(MODEL(), K("temperature", "NaN"), H(pr), K("top_p", "-Infinity"), K("x", "Infinity")),
              "admitted", REF)
    hint_case(g, "null-trusted-unchanged", "a single null hint in trusted mode is forwarded unchanged, nothing counted", True,
              std("null"), "null")
    hint_case(g, "null-trusted-spaced", "a single null hint with odd whitespace, trusted: unchanged", True,
              B(MODEL(), H("null", colon=" :  ", sep=" ,"), MSGS(), tail=" }"), "null")
    hint_case(g, "null-trusted-only-member", "the only member is a null hint, trusted: unchanged", True,
              B(H("null")), "null")
    hint_case(g, "no-hint-trusted", "a body without kv_hints is forwarded unchanged (trusted)", True,
              B(MODEL(), MSGS()), "no_hint")
    hint_case(g, "empty-object-trusted", "the empty object {} is forwarded unchanged (trusted)", True,
              B(), "no_hint")


def gen_untrusted():
    g = "untrusted"
    # The four examples of the brief, checked literally.
    cases = [
        ("example-middle", B(K("a", "1"), H("{}", sep=", "), K("b", "2", sep=", ")), b'{"a":1, "b":2}'),
        ("example-first", B(H("{}"), K("a", "1", sep=" ,")), b'{"a":1}'),
        ("example-last", B(K("a", "1"), H("{}", sep=" , ")), b'{"a":1}'),
        ("example-only-spaced", B(H("{}"), head="{ ", tail=" }"), b'{  }'),
    ]
    for short, body, want in cases:
        e = hint_case(g, short, "member removal example from the spec: " + want.decode(), False, body, "stripped")
        assert e["forwarded_body"].encode() == want, (short, e["forwarded_body"])
    hint_case(g, "reference-middle", "a valid envelope is stripped in untrusted mode, counted once", False,
              std(REF), "stripped")
    hint_case(g, "reference-only-member", "kv_hints as the only member leaves {}", False,
              B(H(REF)), "stripped")
    hint_case(g, "reference-first", "kv_hints as first member", False, B(H(REF), MODEL(), MSGS()), "stripped")
    hint_case(g, "reference-last", "kv_hints as last member", False, B(MODEL(), MSGS(), H(REF)), "stripped")
    def pretty_body(order, nl="\n"):
        ms = {"model": K("model", '"m"', colon=": ", sep="," + nl + "  "),
              "hint": H(pretty(REF, 2, nl).replace(nl, nl + "  "), colon=": ", sep="," + nl + "  "),
              "stream": K("stream", "false", colon=": ", sep="," + nl + "  ")}
        return Body([ms[o] for o in order], head="{" + nl + "  ", tail=nl + "}" + nl)
    e = hint_case(g, "pretty-body-middle", "pretty-printed body, hint in the middle: other lines kept", False,
                  pretty_body(["model", "hint", "stream"]), "stripped")
    assert e["forwarded_body"] == '{\n  "model": "m",\n  "stream": false\n}\n'
    e = hint_case(g, "pretty-body-first", "pretty-printed body, hint first", False,
                  pretty_body(["hint", "model", "stream"]), "stripped")
    assert e["forwarded_body"] == '{\n  "model": "m",\n  "stream": false\n}\n'
    e = hint_case(g, "pretty-body-last", "pretty-printed body, hint last", False,
                  pretty_body(["model", "stream", "hint"]), "stripped")
    assert e["forwarded_body"] == '{\n  "model": "m",\n  "stream": false\n}\n'
    e = hint_case(g, "pretty-body-crlf", "CRLF pretty-printed body, hint in the middle", False,
                  pretty_body(["model", "hint", "stream"], "\r\n"), "stripped")
    assert e["forwarded_body"] == '{\r\n  "model": "m",\r\n  "stream": false\r\n}\r\n'
    hint_case(g, "tabs-and-spaces", "tabs and spaces everywhere around the removed member", False,
              B(K("a", "1", colon="\t:\t"), H("{}", colon=" \t: ", sep="\t,\t"), K("b", "[ 1 , 2 ]", sep=" \t, "),
                head="\t{\t", tail="\t}\t"), "stripped")
    hint_case(g, "null-middle", "a null hint is removed in untrusted mode but not counted", False,
              std("null"), "null_hint")
    hint_case(g, "null-only-member", "the only member is a null hint: removed, not counted", False,
              B(H("null")), "null_hint")
    hint_case(g, "null-spaced", "null hint with whitespace around it: removed, not counted", False,
              B(MODEL(), H("null", colon=" : ", sep=" , "), K("stream", "true", sep=" ,"), head="{ ", tail=" }"), "null_hint")
    for short, v in [("string", '"kv"'), ("number", "42"), ("array", "[" + REF + "]"), ("true", "true"),
                     ("false", "false"), ("empty-object", "{}"), ("empty-string", '""'), ("zero", "0"),
                     ("empty-array", "[]")]:
        hint_case(g, "value-" + short, "a non-null hint of type " + short + " is stripped and counted untrusted",
                  False, std(v), "stripped")
    hint_case(g, "malformed-counts-untrusted", "a malformed envelope counts as untrusted, not malformed", False,
              std(env({"message_id": DROP})), "stripped")
    hint_case(g, "unknown-version-counts-untrusted", "an unknown version counts as untrusted", False,
              std(env({"protocol_version": '"9.9"'})), "stripped")
    hint_case(g, "nan-in-hint", "NaN inside the hint: stripped (untrusted)", False,
              std(env_payload('{"x":NaN}')), "stripped")
    hint_case(g, "no-hint", "a body without kv_hints is forwarded unchanged (untrusted)", False,
              B(MODEL(), MSGS()), "no_hint")
    hint_case(g, "empty-object", "the empty object {} is forwarded unchanged (untrusted)", False, B(), "no_hint")


def gen_members():
    g = "members"
    for trusted in (False, True):
        t = "-trusted" if trusted else "-untrusted"
        mode = " (trusted)" if trusted else " (untrusted)"
        hint_case(g, "nested-object" + t, "kv_hints inside a nested object is not a top-level member" + mode, trusted,
                  B(MODEL(), K("metadata", '{"kv_hints":' + REF + ',"x":1}')), "no_hint")
        hint_case(g, "nested-in-array" + t, "kv_hints inside an object in an array is not touched" + mode, trusted,
                  B(MODEL(), K("messages", '[{"role":"user","content":"hi","kv_hints":{"a":1}}]')), "no_hint")
        hint_case(g, "extra-body-nested" + t, "extra_body.kv_hints is nested, not top-level" + mode, trusted,
                  B(MODEL(), K("extra_body", '{"kv_hints":null}')), "no_hint")
        hint_case(g, "string-mentions-key" + t, "a string value containing the text kv_hints is not touched" + mode, trusted,
                  B(MODEL(), K("prompt", '"the \\"kv_hints\\": {} field"')), "no_hint")
        hint_case(g, "fake-member-in-string" + t, "a whole fake member inside an escaped string is not touched" + mode, trusted,
                  B(MODEL(), K("prompt", '"x\\",\\"kv_hints\\":{\\"protocol_version\\":\\"0.1\\"},\\"y\\":\\""')), "no_hint")
    for short, key in [("uppercase", '"KV_HINTS"'), ("trailing-space", '"kv_hints "'), ("leading-space", '" kv_hints"'),
                       ("escaped-quote-suffix", '"kv_hints\\""'), ("escaped-backslash-suffix", '"kv_hints\\\\"'),
                       ("dash", '"kv-hints"'), ("nul-suffix", '"kv_hints\\u0000"'), ("singular", '"kv_hint"'),
                       ("extra-letter", '"kv_hintss"'), ("camel", '"kvHints"'), ("escaped-uppercase-k", '"\\u004bv_hints"')]:
        assert json.loads(key) != "kv_hints"
        for trusted in (False, True):
            t = "-trusted" if trusted else "-untrusted"
            hint_case(g, "key-" + short + t, "key " + key + " is not kv_hints after decoding" + (" (trusted)" if trusted else " (untrusted)"),
                      trusted, B(MODEL(), M(key, REF), MSGS()), "no_hint")
    pr = pretty(REF)
    for short, key in [("escaped-underscore", '"kv\\u005fhints"'), ("escaped-underscore-upper-hex", '"kv\\u005Fhints"'),
                       ("escaped-kv", '"\\u006b\\u0076_hints"'),
                       ("fully-escaped", '"\\u006b\\u0076\\u005f\\u0068\\u0069\\u006e\\u0074\\u0073"')]:
        hint_case(g, "key-" + short + "-trusted", "key " + key + " decodes to kv_hints: admitted, forwarded under the literal key", True,
                  std(pr, key=key), "admitted", REF)
        hint_case(g, "key-" + short + "-canonical-trusted", "key " + key + " with a canonical envelope: only the key is rewritten", True,
                  B(MODEL(), H(REF, key=key, colon=" : "), MSGS()), "admitted", REF)
        hint_case(g, "key-" + short + "-untrusted", "key " + key + " decodes to kv_hints: stripped", False,
                  std(REF, key=key), "stripped")
    both(g, "backslash-before-real-hint",
         "a string ending in an escaped backslash is followed by a real kv_hints member",
         B(MODEL(), K("prompt", '"C:\\\\dir\\\\"'), H(pr), K("tail", '"\\\\\\""')), "admitted", REF)
    # Duplicate top-level members.
    hint_case(g, "duplicate-two-untrusted", "two non-null kv_hints members: both removed, counted once", False,
              B(H(REF), MODEL(), H('{"x":1}')), "stripped")
    hint_case(g, "duplicate-null-and-object-untrusted", "null then object: both removed, counted once", False,
              B(MODEL(), H("null"), MSGS(), H(REF)), "stripped")
    hint_case(g, "duplicate-object-and-null-untrusted", "object then null (the worker reads the last, null): both removed, not counted", False,
              B(MODEL(), H(REF), H("null", sep=" , ")), "null_hint")
    hint_case(g, "duplicate-three-null-last-untrusted", "two objects then null: all removed, not counted", False,
              B(H(REF), MODEL(), H('{"x":1}'), MSGS(), H("null")), "null_hint")
    hint_case(g, "duplicate-two-null-untrusted", "two null members: both removed, nothing counted", False,
              B(H("null"), MODEL(), H("null")), "null_hint")
    hint_case(g, "duplicate-three-mixed-untrusted", "three members (null, escaped-key object, string): all removed, counted once", False,
              B(H("null"), MODEL(), H(REF, key='"kv\\u005fhints"', sep=",\n"), MSGS(), H('"x"', sep=" ,")), "stripped")
    hint_case(g, "duplicate-three-null-untrusted", "three null members: all removed, nothing counted", False,
              B(MODEL(), H("null"), H("null"), H("null")), "null_hint")
    hint_case(g, "duplicate-two-valid-trusted", "two valid envelopes: malformed, both removed", True,
              B(H(REF), MODEL(), H(REF)), "discarded")
    hint_case(g, "duplicate-two-null-trusted", "two null members in trusted mode: no hint, both removed, not counted", True,
              B(MODEL(), H("null"), MSGS(), H("null")), "null_hint")
    hint_case(g, "duplicate-null-then-valid-trusted", "null then a valid envelope: malformed, both removed", True,
              B(H("null"), MODEL(), H(REF)), "discarded")
    hint_case(g, "duplicate-valid-then-null-trusted", "valid envelope then null (the worker reads null): both removed, not counted", True,
              B(MODEL(), H(REF), MSGS(), H("null")), "null_hint")
    hint_case(g, "duplicate-malformed-then-null-trusted", "malformed envelope then null: both removed, not counted", True,
              B(MODEL(), H('{"protocol_version":"0.1"}'), H("null", key='"kv\\u005fhints"')), "null_hint")
    hint_case(g, "duplicate-three-mixed-trusted", "three members incl. escaped key: malformed, all removed, counted once", True,
              B(H(pr, sep=" , "), MODEL(), H("null", key='"\\u006b\\u0076_hints"', sep=" ,\t"), MSGS(), H(REF, key='"kv\\u005fhints"')),
              "discarded")
    hint_case(g, "duplicate-adjacent-trusted", "two adjacent members with whitespace: both removed", True,
              B(MODEL(), H(REF, sep=" , "), H(REF, sep=" ,  "), MSGS(sep="\n,"), head="{ ", tail="\n}"), "discarded")
    hint_case(g, "duplicate-only-members-trusted", "the body holds only two kv_hints members, the last null: no hint", True,
              B(H(REF), H("null", sep=", "), head="{ ", tail=" }"), "null_hint")
    hint_case(g, "duplicate-only-members-null-first-trusted", "the body holds only two kv_hints members, the first null: malformed", True,
              B(H("null"), H(REF, sep=", "), head="{ ", tail=" }"), "discarded")
    both(g, "duplicate-other-key", "duplicate non-hint keys (model twice) are left alone",
         B(MODEL(), H(REF), K("model", '"other"')), "admitted", REF)


def gen_version():
    g = "version"
    for short, v in [("missing", DROP), ("number", "0.1"), ("null", "null"), ("true", "true"),
                     ("array", '["0.1"]'), ("object", '{"v":"0.1"}'), ("integer", "1")]:
        hint_case(g, "protocol-" + short, "protocol_version " + short + ": malformed", True,
                  std(env({"protocol_version": v})), "malformed")
    for short, v in [("0-2", '"0.2"'), ("1-0", '"1.0"'), ("empty", '""'), ("0-10", '"0.10"'),
                     ("trailing-space", '"0.1 "'), ("leading-space", '" 0.1"'), ("v-prefix", '"v0.1"'),
                     ("0-01", '"0.01"'), ("zero", '"0"'), ("9-9", '"9.9"'), ("escaped-0-2", '"\\u0030.2"')]:
        hint_case(g, "protocol-" + short, "protocol_version " + v + ": unknown_version", True,
                  std(env({"protocol_version": v})), "unknown_version")
    e = env({"protocol_version": '"\\u0030\\u002e1"'})
    hint_case(g, "protocol-escaped-0-1", "protocol_version written with escapes decodes to 0.1: admitted, re-encoded", True,
              std(e), "admitted", REF)
    hint_case(g, "protocol-last-member", "protocol_version as the last member is found", True,
              std(build([('"message_id"', '"m"'), ('"actions"', "[]"), ('"protocol_version"', '"0.1"')])), "admitted")
    hint_case(g, "protocol-0-1-untrusted", "a valid version does not matter in untrusted mode", False,
              std(REF), "stripped")
    # unknown_version wins over anything after rule 3.
    u = {"protocol_version": '"9.9"'}
    hint_case(g, "unknown-wins-actions-not-array", "protocol 9.9 and actions not an array: unknown_version", True,
              std(env({"protocol_version": '"9.9"', "actions": '"nope"'})), "unknown_version")
    hint_case(g, "unknown-wins-message-id-missing", "protocol 9.9 and message_id missing: unknown_version", True,
              std(env({"protocol_version": '"9.9"', "message_id": DROP})), "unknown_version")
    hint_case(g, "unknown-wins-nan", "protocol 9.9 with NaN inside: unknown_version", True,
              std(env(u, extra=[('"x"', "NaN")])), "unknown_version")
    hint_case(g, "unknown-wins-duplicate-key", "protocol 9.9 with a duplicate key: unknown_version", True,
              std(env(u, extra=[('"message_id"', '"again"')])), "unknown_version")
    hint_case(g, "unknown-wins-integer-range", "protocol 9.9 with an out-of-range integer: unknown_version", True,
              std(env(u, extra=[('"x"', "18446744073709551616")])), "unknown_version")
    hint_case(g, "unknown-wins-lone-surrogate", "protocol 9.9 with a lone surrogate escape: unknown_version", True,
              std(env(u, extra=[('"x"', '"\\ud800"')])), "unknown_version")
    hint_case(g, "unknown-wins-depth", "protocol 9.9 nested 200 deep: unknown_version", True,
              std(env(u, extra=[('"x"', deep_arrays(199))])), "unknown_version")
    big = env_hashes(70000)
    hint_case(g, "unknown-wins-oversized", "protocol 9.9 with a 70,000-byte compact size: unknown_version", True,
              std(big.replace('"protocol_version":"0.1"', '"protocol_version":"9.9"')), "unknown_version")
    hint_case(g, "unknown-wins-last-member", "protocol 9.9 as the last member after malformed fields", True,
              std('{"message_id":5,"actions":{"a":NaN},"message_id":null,"protocol_version":"9.9"}'), "unknown_version")
    hint_case(g, "unknown-wins-payload-not-object", "protocol 2.0 with a non-object payload: unknown_version", True,
              std(env({"protocol_version": '"2.0"'}, actions="[" + action({"payload": '"p"'}) + "]")), "unknown_version")
    # rule 3 malformed before oversized
    hint_case(g, "missing-beats-oversized", "protocol_version missing on a 70,000-byte envelope: malformed, not oversized", True,
              std(big.replace('"protocol_version":"0.1",', "")), "malformed")
    hint_case(g, "number-beats-oversized", "protocol_version a number on a 70,000-byte envelope: malformed", True,
              std(big.replace('"protocol_version":"0.1"', '"protocol_version":0.1')), "malformed")


def gen_structure():
    g = "structure"
    wrong = [("missing", DROP), ("empty", '""'), ("number", "1"), ("null", "null"),
             ("array", '["a1"]'), ("object", '{"id":"a1"}'), ("true", "true")]
    for short, v in wrong:
        hint_case(g, "message-id-" + short, "message_id " + short + ": malformed", True,
                  std(env({"message_id": v})), "malformed")
    for field in ("action_id", "action_type", "action_version"):
        for short, v in wrong:
            hint_case(g, field.replace("_", "-") + "-" + short, field + " " + short + ": malformed", True,
                      std(env(actions="[" + action({field: v}) + "]")), "malformed")
    for short, v in [("missing", DROP), ("array", "[]"), ("string", '"{}"'), ("null", "null"),
                     ("number", "0"), ("true", "true")]:
        hint_case(g, "payload-" + short, "payload " + short + ": malformed", True,
                  std(env(actions="[" + action({"payload": v}) + "]")), "malformed")
    for short, v in [("missing", DROP), ("object", action()), ("string", '"[]"'), ("null", "null"),
                     ("number", "1"), ("object-of-action", '{"a":' + action() + "}")]:
        hint_case(g, "actions-" + short, "actions " + short + ": malformed", True,
                  std(env({"actions": v})), "malformed")
    for short, v in [("number", "1"), ("string", '"a"'), ("null", "null"), ("array", "[" + action() + "]"),
                     ("true", "true")]:
        hint_case(g, "actions-element-" + short, "actions containing a " + short + ": malformed", True,
                  std(env(actions="[" + action() + "," + v + "]")), "malformed")
    hint_case(g, "second-action-invalid", "a valid action followed by one without payload: whole envelope malformed", True,
              std(env(actions="[" + action() + "," + action({"payload": DROP}) + "]")), "malformed")
    hint_case(g, "first-action-invalid", "first action with empty action_type, second valid: malformed", True,
              std(env(actions="[" + action({"action_type": '""'}) + "," + action() + "]")), "malformed")
    for short, v in [("string", '"' + REF.replace('"', '\\"') + '"'), ("number", "42"), ("array", "[" + REF + "]"),
                     ("true", "true"), ("false", "false"), ("empty-object", "{}"), ("empty-array", "[]"),
                     ("float", "1.5")]:
        hint_case(g, "hint-" + short, "a hint value of type " + short + " in trusted mode: malformed", True,
                  std(v), "malformed")
    hint_case(g, "duplicate-envelope-key", "message_id twice at envelope level: malformed", True,
              std(env(extra=[('"message_id"', '"msg-123"')])), "malformed")
    hint_case(g, "duplicate-extra-key", "an extra member twice at envelope level: malformed", True,
              std(env(extra=[('"x"', "1"), ('"x"', "1")])), "malformed")
    hint_case(g, "duplicate-action-key", "action_id twice in an action: malformed", True,
              std(env(actions="[" + action(extra=[('"action_id"', '"a2"')]) + "]")), "malformed")
    hint_case(g, "duplicate-payload-key", "payload twice in an action: malformed", True,
              std(env(actions="[" + action(extra=[('"payload"', "{}")]) + "]")), "malformed")
    hint_case(g, "duplicate-deep-payload-key", "duplicate key deep inside payload: malformed", True,
              std(env_payload('{"a":[{"b":{"c":1,"d":2,"c":1}}]}')), "malformed")
    hint_case(g, "duplicate-escaped-key", "keys equal after decoding (a and \\u0061): malformed", True,
              std(env_payload('{"a":1,"\\u0061":2}')), "malformed")
    hint_case(g, "duplicate-actions-key", "actions twice (second empty): malformed", True,
              std(env(extra=[('"actions"', "[]")])), "malformed")
    e = env_payload('{"a":1,"a ":2,"A":3," a":4}')
    hint_case(g, "similar-keys-not-duplicate", "keys a, 'a ', A, ' a' are distinct: admitted", True,
              std(e), "admitted", e)
    e = env_payload('{"x":{"a":1},"y":{"a":1}}')
    hint_case(g, "same-key-different-objects", "the same key in two different objects is not a duplicate", True,
              std(e), "admitted", e)
    hint_case(g, "duplicate-key-untrusted", "duplicate keys inside the hint do not matter in untrusted mode", False,
              std(env(extra=[('"message_id"', '"x"')])), "stripped")


def gen_numbers():
    g = "numbers"
    ints = [("min-i64", "-9223372036854775808", "admitted"), ("below-min-i64", "-9223372036854775809", "malformed"),
            ("max-u64", "18446744073709551615", "admitted"), ("above-max-u64", "18446744073709551616", "malformed")]
    for short, lit, verdict in ints:
        hint_case(g, "payload-" + short, "integer " + lit + " in payload: " + verdict, True,
                  std(env_payload('{"block_hashes":[1,' + lit + ',2]}')), verdict)
        hint_case(g, "envelope-extra-" + short, "integer " + lit + " in envelope-level extra metadata: " + verdict, True,
                  std(env(extra=[('"trace_seq"', lit)])), verdict)
        hint_case(g, "action-extra-" + short, "integer " + lit + " in action-level extra metadata: " + verdict, True,
                  std(env(actions="[" + action(extra=[('"priority"', lit)]) + "]")), verdict)
    for short, lit, verdict in [("max-i64", "9223372036854775807", "admitted"), ("above-max-i64", "9223372036854775808", "admitted"),
                                ("negative-zero", "-0", "admitted"), ("huge-positive", "1" + "0" * 40, "malformed"),
                                ("huge-negative", "-" + "9" * 30, "malformed")]:
        hint_case(g, "payload-" + short, "integer " + lit + " in payload: " + verdict, True,
                  std(env_payload('{"n":' + lit + "}")), verdict)
    floats = [("1e308", "1e308", "admitted"), ("1e309", "1e309", "malformed"), ("neg-1-5e-400", "-1.5e-400", "admitted"),
              ("neg-1e309", "-1e309", "malformed"), ("max-double", "1.7976931348623157e308", "admitted"),
              ("1-8e308", "1.8e308", "malformed"), ("upper-e-400", "1E400", "malformed"), ("1e-400", "1e-400", "admitted"),
              ("u64-plus-one-as-float", "18446744073709551616.0", "admitted"), ("1e30", "1e30", "admitted"),
              ("big-exponent-form", "1e19", "admitted"), ("long-mantissa", "3." + "1415926535" * 10, "admitted"),
              ("zero-exponent-huge", "0e999999", "admitted"), ("exp-plus", "2.5E+300", "admitted"),
              ("inf-by-digits", "1" + "0" * 309 + ".0", "malformed")]
    for short, lit, verdict in floats:
        hint_case(g, "float-" + short, "float " + (lit if len(lit) < 40 else lit[:20] + "...") + " in payload: " + verdict, True,
                  std(env_payload('{"f":' + lit + "}")), verdict)
    hint_case(g, "float-1e309-envelope-extra", "float 1e309 in envelope-level extra metadata: malformed", True,
              std(env(extra=[('"score"', "1e309")])), "malformed")
    hint_case(g, "float-1e309-action-extra", "float 1e309 in action-level extra metadata: malformed", True,
              std(env(actions="[" + action(extra=[('"score"', "-1e309")]) + "]")), "malformed")
    for short, lit in [("nan", "NaN"), ("infinity", "Infinity"), ("neg-infinity", "-Infinity")]:
        hint_case(g, short + "-in-payload-trusted", lit + " inside the hint payload: malformed", True,
                  std(env_payload('{"x":' + lit + "}")), "malformed")
        hint_case(g, short + "-in-payload-untrusted", lit + " inside the hint: stripped (untrusted)", False,
                  std(env_payload('{"x":' + lit + "}")), "stripped")
    hint_case(g, "nan-envelope-extra-trusted", "NaN as envelope-level extra metadata: malformed", True,
              std(env(extra=[('"x"', "NaN")])), "malformed")
    for trusted in (False, True):
        t = "-trusted" if trusted else "-untrusted"
        hint_case(g, "nan-in-prompt-no-hint" + t, "NaN/Infinity outside any hint: forwarded byte-identical", trusted,
                  B(MODEL(), K("temperature", "NaN"), K("logit_bias", '{"1":-Infinity,"2":Infinity}'), K("n", "[NaN]")), "no_hint")
        hint_case(g, "big-numbers-in-prompt-no-hint" + t, "out-of-range integers and 1e400 outside the hint are not checked", trusted,
                  B(MODEL(), K("seed", "18446744073709551616"), K("x", "-" + "9" * 100), K("y", "1e400"), K("z", "-0.0E-0")), "no_hint")
    hint_case(g, "big-numbers-outside-admitted", "out-of-range numbers in the prompt with an admitted hint", True,
              B(MODEL(), K("seed", "18446744073709551616"), H(pretty(REF)), K("y", "1e400"), K("z", "NaN")), "admitted", REF)
    hint_case(g, "big-numbers-outside-stripped", "out-of-range numbers in the prompt with a stripped hint", False,
              B(MODEL(), K("seed", "18446744073709551616"), H(REF), K("y", "1e400")), "stripped")
    gen_python_numbers(g)
    hint_case(g, "integer-in-string-not-checked", "out-of-range digits inside a string are just a string", True,
              std(env_payload('{"h":"18446744073709551616"}')), "admitted")


def sized(make, target):
    """make(k) with k chosen so that the compact size as the worker measures
    it (canon: numbers as json.dumps writes them) is exactly target."""
    base = len(canon(parse_raw(make(0))).encode())
    text = make(target - base)
    assert len(canon(parse_raw(text)).encode()) == target, target
    return text


def gen_python_numbers(g):
    """Numbers as the worker writes them back before it measures an envelope
    (docs/spec.md, "Compact size"), and the integers it cannot read."""
    e = env_payload('{"a":1.0,"b":1E+05,"c":-0,"d":-0.0,"e":0.10,"f":1e-7,"g":2E5,"h":100}')
    hint_case(g, "literals-as-python-writes", "number literals are forwarded as json.dumps writes them (1E+05 is 100000.0, -0 is 0, 0.10 is 0.1)", True,
              std(pretty(e)), "admitted", env_payload('{"a":1.0,"b":100000.0,"c":0,"d":-0.0,"e":0.1,"f":1e-07,"g":200000.0,"h":100}'))
    # float.__repr__: shortest round-trip digits, fixed notation with .0 for
    # a decimal exponent in -4..15, else scientific with a signed exponent of
    # at least two digits.
    shapes = [("1e15", "1e15", "1000000000000000.0"), ("1e16", "1e16", "1e+16"),
              ("fixed-16-digits", "1234567890123456.0", "1234567890123456.0"),
              ("17-digits", "12345678901234567.0", "1.2345678901234568e+16"),
              ("largest-fixed", "9999999999999998.0", "9999999999999998.0"),
              ("1e-4", "1e-4", "0.0001"), ("1e-5", "1e-5", "1e-05"), ("0-0001", "0.0001", "0.0001"),
              ("0-00001", "0.00001", "1e-05"), ("9-999e-5", "0.00009999", "9.999e-05"),
              ("upper-e2", "1E2", "100.0"), ("one-point-zero", "1.0", "1.0"), ("trailing-zeros", "2.50000", "2.5"),
              ("neg-zero", "-0.0", "-0.0"), ("neg-zero-exponent", "-0e5", "-0.0"), ("zero-exponent-huge", "0E+999999", "0.0"),
              ("underflow", "1e-400", "0.0"), ("neg-underflow", "-1e-400", "-0.0"),
              ("min-subnormal", "5e-324", "5e-324"), ("half-min-subnormal-up", "2.4703282292062328e-324", "5e-324"),
              ("half-min-subnormal-down", "2.4703282292062327e-324", "0.0"),
              ("max-double-up", "1.7976931348623158e308", "1.7976931348623157e+308"),
              ("below-overflow-midpoint", str(2 ** 1024 - 2 ** 970 - 1) + ".0", "1.7976931348623157e+308"),
              ("exp-300", "2.5E+300", "2.5e+300"), ("u64-plus-one", "18446744073709551616.0", "1.8446744073709552e+19"),
              ("long-mantissa", "3." + "1415926535" * 10, "3.1415926535141594"),
              ("long-zeros-compensating-exponent", "0." + "0" * 12000 + "15e12005", "15000.0")]
    for short, lit, want in shapes:
        desc = lit if len(lit) < 30 else lit[:20] + "..."
        hint_case(g, "py-float-" + short, "float " + desc + " in payload is forwarded as " + want, True,
                  std(env_payload('{"f":' + lit + "}")), "admitted", env_payload('{"f":' + want + "}"))
    for short, lit in [("overflow-midpoint", str(2 ** 1024 - 2 ** 970) + ".0"), ("max-double-plus", "1.7976931348623159e308")]:
        hint_case(g, "py-float-" + short, "float " + lit[:20] + "... reads as Infinity: malformed", True,
                  std(env_payload('{"f":' + lit + "}")), "malformed")
    # Size: what the worker measures, not the literals' text.
    e = env_payload('{"f":[' + ",".join(["1e15"] * 13000) + "]}")
    worker = len(canon(parse_raw(e)).encode())
    assert len(e) <= COMPACT_LIMIT < worker
    hint_case(g, "floats-1e15-13000-oversized", "13,000 x 1e15: %d bytes as written, %d as the worker writes them: oversized" % (len(e), worker), True,
              std(e), "oversized")
    dec = "0.1" + "0" * 38 + "1"
    e = env_payload('{"f":[' + ",".join([dec] * 1600) + "]}")
    worker = len(canon(parse_raw(e)).encode())
    assert len(e) > COMPACT_LIMIT >= worker
    hint_case(g, "long-decimals-1600-admitted", "1,600 long decimals: %d bytes as written, %d as the worker writes them (0.1 each): admitted" % (len(e), worker), True,
              std(e), "admitted", env_payload('{"f":[' + ",".join(["0.1"] * 1600) + "]}"))
    many = lambda lit: (lambda k: env_payload('{"f":[' + ",".join([lit] * 3000) + '],"s":"' + "x" * k + '"}'))
    for target, verdict in [(65536, "admitted"), (65537, "oversized")]:
        e = sized(many("1e15"), target)
        hint_case(g, "floats-1e15-%d-%s" % (target, verdict), "3,000 x 1e15 counted as 1000000000000000.0, compact size %d: %s" % (target, verdict), True,
                  std(e), verdict)
    for lit, word in [("1e400", "Infinity"), ("-1e400", "-Infinity")]:
        make = lambda k, lit=lit: env(extra=[('"score"', lit), ('"note"', '"' + "x" * k + '"')])
        for target, verdict in [(65536, "malformed"), (65537, "oversized")]:
            e = sized(make, target)
            assert len(e) < target
            hint_case(g, "overflow-%s-%d-%s" % ("neg" if lit[0] == "-" else "pos", target, verdict),
                      "%s counts as %s (%d bytes), compact size %d: %s" % (lit, word, len(word), target, verdict), True,
                      std(e), verdict)
    # Python's int max str digits (4300): json.loads cannot read a longer
    # integer anywhere in a body, so neither does kvgate (400).
    i4300, i4301 = "9" * 4300, "9" * 4301
    both(g, "int-4300-digits-in-hint", "an integer of 4,300 digits in the hint is read, and out of range: malformed",
         std(env_payload('{"n":' + i4300 + "}")), "malformed")
    hint_case(g, "int-4300-digits-outside-admitted", "an integer of 4,300 digits outside the hint is read: admitted", True,
              B(MODEL(), K("seed", i4300), H(REF), K("neg", "-" + i4300)), "admitted", REF)
    for trusted in (False, True):
        t = "-trusted" if trusted else "-untrusted"
        hint_case(g, "int-4300-digits-no-hint" + t, "integers of 4,300 digits (sign not counted) without a hint: forwarded", trusted,
                  B(MODEL(), K("seed", i4300), K("neg", "-" + i4300)), "no_hint")
        hint_case(g, "float-4301-digits-outside" + t, "a float with 4,301 integer digits is read (floats have no digit limit)", trusted,
                  B(MODEL(), K("x", "1" * 4301 + ".5"), K("y", "1" * 4301 + "e0"), H(REF)), "admitted" if trusted else "stripped",
                  REF if trusted else None)
        reject(g, "int-4301-digits-in-hint" + t, "an integer of 4,301 digits in the hint: json.loads cannot read the body: 400", trusted,
               std(env_payload('{"n":' + i4301 + "}")).render())
        reject(g, "neg-int-4301-digits-in-hint" + t, "an integer of -4,301 digits in the hint envelope: 400", trusted,
               std(env(extra=[('"n"', "-" + i4301)])).render())
        reject(g, "int-4301-digits-outside" + t, "an integer of 4,301 digits outside the hint: 400", trusted,
               B(MODEL(), K("seed", i4301), H(REF)).render())
        reject(g, "int-4301-digits-nested-no-hint" + t, "an integer of 4,301 digits deep in the prompt, no hint: 400", trusted,
               B(MODEL(), K("messages", '[{"role":"user","content":[' + i4301 + "]}]")).render())
        reject(g, "int-4301-digits-top" + t, "a body that is one integer of 4,301 digits: 400", trusted, i4301.encode())
    reject(g, "neg-int-4301-digits-outside", "an integer of -4,301 digits outside any hint: 400", False,
           B(MODEL(), K("x", "-" + i4301)).render())


def gen_strings():
    g = "strings"
    cases = [
        ("escaped-letter", r'"m\u0041"', '"mA"'),
        ("escaped-solidus", r'"a\/b\/c"', '"a/b/c"'),
        ("unit-separator-lowercase", r'"x\u001Fy"', r'"x\u001fy"'),
        ("nul-escape-kept", r'"\u0000"', r'"\u0000"'),
        ("short-escapes-kept", r'"\b\f\n\r\t"', r'"\b\f\n\r\t"'),
        ("long-escapes-to-short", r'"\u0008\u000C\u000a\u000D\u0009"', r'"\b\f\n\r\t"'),
        ("quote-backslash-kept", r'"\"\\"', r'"\"\\"'),
        ("quote-backslash-from-u", r'"\u0022\u005c\u005C"', r'"\"\\\\"'),
        ("other-controls", r'"\u0001\u0002\u000b\u000e\u001b"', r'"\u0001\u0002\u000b\u000e\u001b"'),
        ("latin1-escape-raw", r'"\u00e9\u00E9"', '"\u00e9\u00e9"'),
        ("line-separators-raw", r'"\u2028\u2029"', '"\u2028\u2029"'),
        ("raw-line-separators-kept", '"\u2028x\u2029"', '"\u2028x\u2029"'),
        ("html-chars-raw", r'"<>&\u003c\u003e\u0026"', '"<>&<>&"'),
        ("del-raw", r'"\u007f"', '"\x7f"'),
        ("raw-del-kept", '"a\x7fb"', '"a\x7fb"'),
        ("non-ascii-raw-kept", '"\u65e5\u672c\u8a9e \u00fc"', '"\u65e5\u672c\u8a9e \u00fc"'),
        ("cjk-escape-raw", r'"\u65e5"', '"\u65e5"'),
        ("surrogate-pair", r'"\ud83d\ude00"', '"\U0001F600"'),
        ("surrogate-pair-upper-hex", r'"\uD83D\uDE00"', '"\U0001F600"'),
        ("raw-astral-kept", '"\U0001F600"', '"\U0001F600"'),
        ("bom-char-escape", r'"\ufeff"', '"\ufeff"'),
        ("nbsp-escape", r'"\u00a0"', '"\u00a0"'),
        ("space-escape", r'"\u0020"', '" "'),
        ("max-bmp-escape", r'"\uffff"', '"\uffff"'),
        ("max-codepoint-pair", r'"\udbff\udfff"', '"\U0010FFFF"'),
        ("mixed", r'"a\u0041\/\u00e9\n\u000a\"\ud83d\ude00"', '"aA/\u00e9\\n\\n\\"\U0001F600"'),
    ]
    for short, raw, want in cases:
        e = env_payload('{"s":' + raw + "}")
        exp = env_payload('{"s":' + want + "}")
        hint_case(g, short, "string " + raw[:40] + " canonicalised to " + want[:40], True,
                  std(e), "admitted", exp)
    e = env({"message_id": r'"m\u0073g-\u0031\/2"'})
    hint_case(g, "escaped-message-id", "escapes in message_id are re-encoded minimally", True,
              std(e), "admitted", env({"message_id": '"msg-1/2"'}))
    e = env_payload('{"s\\u0041":1}')
    hint_case(g, "escaped-payload-key", "an escaped key inside payload is re-encoded", True,
              std(e), "admitted", env_payload('{"sA":1}'))
    e = ('{"protocol\\u005fversion":"0.1","message_id":"m","\\u0061ctions":[{"action_id":"a","action_type":"t",'
         '"action_version":"v","p\\u0061yload":{}}]}')
    hint_case(g, "escaped-field-names", "escaped envelope field names are recognised and re-encoded", True,
              std(e), "admitted",
              '{"protocol_version":"0.1","message_id":"m","actions":[{"action_id":"a","action_type":"t","action_version":"v","payload":{}}]}')
    e = env(extra=[('"a\\/b\\n"', '"\\/"')])
    hint_case(g, "escaped-extra-key", "key with \\/ and \\n in extra metadata is canonicalised", True,
              std(e), "admitted", env(extra=[('"a/b\\n"', '"/"')]))
    e = env_payload('{"\\ud83d\\ude00":"ok"}')
    hint_case(g, "surrogate-pair-in-key", "a valid surrogate pair in a key becomes raw UTF-8", True,
              std(e), "admitted", env_payload('{"\U0001F600":"ok"}'))
    for short, raw in [("lone-high", r'"\ud800"'), ("lone-low", r'"\udc00"'), ("high-then-letter", r'"\ud800\u0041"'),
                       ("reversed-pair", r'"\ude00\ud83d"'), ("high-at-end", r'"abc\ud83d"'), ("two-highs", r'"\ud800\ud800"'),
                       ("high-then-raw", r'"\ud83dx"'), ("high-upper-hex", r'"\uDBFF"')]:
        hint_case(g, "surrogate-" + short, "lone surrogate escape " + raw + " inside the hint: malformed", True,
                  std(env_payload('{"s":' + raw + "}")), "malformed")
    hint_case(g, "surrogate-in-message-id", "lone surrogate escape in message_id: malformed", True,
              std(env({"message_id": r'"m\udfff"'})), "malformed")
    hint_case(g, "surrogate-in-key", "lone surrogate escape in a payload key: malformed", True,
              std(env_payload(r'{"\ud800":1}')), "malformed")
    hint_case(g, "surrogate-in-hint-untrusted", "lone surrogate escape inside the hint: stripped (untrusted)", False,
              std(env_payload(r'{"s":"\ud800"}')), "stripped")
    hint_case(g, "lone-surrogate-in-prompt-admitted", "a lone surrogate escape outside the hint is accepted and kept", True,
              B(MODEL(), K("prompt", r'"bad \ud800 pair \udc00"'), H(pretty(REF))), "admitted", REF)
    hint_case(g, "lone-surrogate-in-prompt-untrusted", "a lone surrogate escape outside the hint, untrusted: stripped", False,
              B(MODEL(), K("prompt", r'"bad \ud800"'), H(REF)), "stripped")
    hint_case(g, "raw-non-ascii-prompt", "raw non-ASCII, U+2028 and DEL in the prompt are kept", True,
              B(MODEL(), K("prompt", '"caf\u00e9 \u2028 \x7f \U0001F600"'), H(REF)), "admitted", REF)


def gen_size():
    g = "size"
    e = env_hashes(65536)
    hint_case(g, "hashes-65536-admitted", "block_hashes grown to a compact size of exactly 65,536: admitted", True,
              std(e), "admitted", e)
    hint_case(g, "hashes-65537-oversized", "block_hashes grown to a compact size of 65,537: oversized", True,
              std(env_hashes(65537)), "oversized")
    hint_case(g, "hashes-65537-untrusted", "65,537-byte envelope in untrusted mode: stripped", False,
              std(env_hashes(65537)), "stripped")
    e = env_note(65536)
    hint_case(g, "note-65536-admitted", "string in envelope extra metadata padded to exactly 65,536: admitted", True,
              std(e), "admitted", e)
    hint_case(g, "note-65537-oversized", "string in envelope extra metadata padded to 65,537: oversized", True,
              std(env_note(65537)), "oversized")
    e = env_note(65536, where="action")
    hint_case(g, "action-note-65536-admitted", "string in action extra metadata padded to exactly 65,536: admitted", True,
              std(e), "admitted", e)
    hint_case(g, "action-note-65537-oversized", "string in action extra metadata padded to 65,537: oversized", True,
              std(env_note(65537, where="action")), "oversized")
    e = env_note(65536, unit="\u00e9", unit_canon_len=2)
    hint_case(g, "two-byte-chars-65536-admitted", "65,536 UTF-8 bytes (fewer characters): admitted", True,
              std(e), "admitted", e)
    e = env_note(65537, unit="\u00e9", unit_canon_len=2)
    assert len(parse_raw(e)) and len(canon(parse_raw(e))) < 65536  # fewer characters than the limit
    hint_case(g, "two-byte-chars-65537-oversized", "65,537 UTF-8 bytes but under 65,536 characters: oversized", True,
              std(e), "oversized")
    e = env_note(65536, unit="\U0001F600", unit_canon_len=4, unit_raw="\\ud83d\\ude00")
    hint_case(g, "escaped-pairs-65536-admitted", "surrogate-pair escapes (12 raw bytes, 4 canonical) to exactly 65,536: admitted", True,
              std(e), "admitted", canon(parse_raw(e)))
    # escapes: raw is much larger than canonical
    def esc_note(target):
        base = len(env(extra=[('"note"', '""')]).encode())
        n = target - base
        k = 20000
        raw = "\\u0041" * k + "x" * (n - k)
        text = env(extra=[('"note"', '"' + raw + '"')])
        assert len(canon(parse_raw(text)).encode()) == target
        return text
    e = esc_note(65536)
    assert len(e) > 65536
    hint_case(g, "escapes-raw-larger-65536-admitted", "raw size over 65,536 from \\u0041 escapes, canonical exactly 65,536: admitted", True,
              std(e), "admitted", canon(parse_raw(e)))
    hint_case(g, "escapes-raw-larger-65537-oversized", "raw size over 65,536 from escapes, canonical 65,537: oversized", True,
              std(esc_note(65537)), "oversized")
    e = env_note(65536, unit="\\u0001", unit_canon_len=6)
    hint_case(g, "control-escapes-65536-admitted", "\\u0001 escapes count 6 bytes each in the compact size: exactly 65,536", True,
              std(e), "admitted", e)
    e = env_note(65537, unit="\\u0001", unit_canon_len=6)
    hint_case(g, "control-escapes-65537-oversized", "\\u0001 escapes counted as 6 bytes each: 65,537 oversized", True,
              std(e), "oversized")
    p = env_hashes(65536, pretty_print=True)
    assert 65536 < len(p) < MIB
    hint_case(g, "pretty-65536-admitted", "indent-2 envelope, raw %d bytes, compact exactly 65,536: admitted" % len(p), True,
              std(p), "admitted", env_hashes(65536))
    p = env_hashes(60000, pretty_print=True)
    assert 65536 < len(p) < MIB
    hint_case(g, "pretty-60000-admitted", "indent-2 envelope, raw %d bytes, compact 60,000: admitted" % len(p), True,
              std(p), "admitted", env_hashes(60000))
    p = env_hashes(65537, pretty_print=True)
    hint_case(g, "pretty-65537-oversized", "indent-2 envelope whose compact form is 65,537: oversized", True,
              std(p), "oversized")
    # A lone surrogate, encoded or escaped, counts as its three-byte encoding.
    for short, unit in [("encoded", "\ud800"), ("escaped", "\\ud800")]:
        for target, verdict in [(65536, "malformed"), (65537, "oversized")]:
            e = env_note(target).replace("xxx", unit, 1)
            assert len(canon(parse_raw(e)).encode("utf-8", "surrogatepass")) == target
            hint_case(g, "%s-surrogate-%d-%s" % (short, target, verdict),
                      "%s lone surrogate counted as 3 bytes in a compact size of %d: %s" % (short, target, verdict), True,
                      std(e), verdict)
    # Whitespace is not counted, however much of it there is.
    ws = "{" + " " * (MIB + 50000) + REF[1:]
    assert len(ws) > MIB
    hint_case(g, "raw-over-1mib-whitespace-trusted", "a hint value over 1 MiB raw (mostly whitespace, compact 213): admitted", True,
              std(ws), "admitted", REF)
    hint_case(g, "raw-over-1mib-whitespace-untrusted", "a hint value over 1 MiB raw in untrusted mode: stripped", False,
              std(ws), "stripped")
    small = env(actions="[]").replace("msg-123", "m")
    assert len(small) == 56
    p = pretty(small, indent=MIB // 3)
    assert len(p) > MIB
    hint_case(g, "pretty-1mib-compact-56-admitted", "an envelope pretty-printed to %d bytes whose compact form is 56: admitted" % len(p), True,
              std(p), "admitted", small)
    p = pretty(env_hashes(65537), indent=1, nl="\r\n")
    hint_case(g, "pretty-crlf-65537-oversized", "CRLF pretty-printed envelope whose compact form is 65,537: oversized", True,
              std(p), "oversized")
    p = "{" + " " * MIB + env_hashes(65537)[1:]
    hint_case(g, "whitespace-1mib-then-65537-oversized", "1 MiB of whitespace, then an envelope of 65,537 compact bytes: oversized", True,
              std(p), "oversized")
    big = env_hashes(70000)
    hint_case(g, "oversized-beats-malformed", "70,000-byte envelope without message_id: oversized (rule 4 before 5)", True,
              std(big.replace('"message_id":"msg-size",', "")), "oversized")
    hint_case(g, "oversized-beats-nan", "70,000-byte envelope with NaN: oversized", True,
              std(big.replace("[{", '[NaN,{', 1)), "oversized")
    hint_case(g, "oversized-beats-duplicate", "70,000-byte envelope with a duplicate key: oversized", True,
              std(big.replace('"message_id":"msg-size"', '"message_id":"a","message_id":"b"')), "oversized")
    hint_case(g, "oversized-beats-depth", "70,000-byte envelope nested 200 deep: oversized", True,
              std(big[:-1] + ',"deep":' + deep_arrays(200) + "}"), "oversized")
    hint_case(g, "oversized-not-truncated", "an oversized envelope is removed whole; body otherwise unchanged", True,
              B(MODEL(), H(pretty(env_hashes(100000))), MSGS()), "oversized")


def gen_depth():
    g = "depth"
    # envelope 1, actions 2, action 3, payload 4: 124 arrays inside payload reach 128.
    e = env_payload('{"nest":' + deep_arrays(124) + "}")
    hint_case(g, "payload-arrays-128-admitted", "arrays inside payload reaching depth exactly 128: admitted", True,
              std(e), "admitted", e)
    hint_case(g, "payload-arrays-129-malformed", "arrays inside payload reaching depth 129: malformed", True,
              std(env_payload('{"nest":' + deep_arrays(125) + "}")), "malformed")
    e = env_payload('{"n":' + deep_objects(123, "{}") + "}")
    hint_case(g, "payload-objects-128-admitted", "objects nested in payload to depth exactly 128 (innermost {}): admitted", True,
              std(e), "admitted", e)
    hint_case(g, "payload-objects-129-malformed", "objects nested in payload to depth 129: malformed", True,
              std(env_payload('{"n":' + deep_objects(124, "{}") + "}")), "malformed")
    e = env_payload('{"nest":' + deep_arrays(124, "") + "}")
    hint_case(g, "payload-empty-array-128-admitted", "innermost empty array at depth 128: admitted", True,
              std(e), "admitted", e)
    hint_case(g, "payload-empty-array-129-malformed", "innermost empty array at depth 129: malformed", True,
              std(env_payload('{"nest":' + deep_arrays(125, "") + "}")), "malformed")
    e = env(extra=[('"x"', deep_arrays(127))])
    hint_case(g, "envelope-extra-128-admitted", "extra metadata at envelope level nested to depth 128: admitted", True,
              std(e), "admitted", e)
    hint_case(g, "envelope-extra-129-malformed", "extra metadata at envelope level nested to depth 129: malformed", True,
              std(env(extra=[('"x"', deep_arrays(128))])), "malformed")
    e = env(actions="[" + action(extra=[('"x"', deep_arrays(125))]) + "]")
    hint_case(g, "action-extra-128-admitted", "extra metadata at action level nested to depth 128: admitted", True,
              std(e), "admitted", e)
    e = env_payload('{"nest":' + deep_arrays(124) + "}")
    hint_case(g, "explicit-max-128-admitted", "max_depth given explicitly as 128, depth 128: admitted", True,
              std(pretty(e)), "admitted", e, max_depth=128)
    hint_case(g, "max-depth-4-reference-malformed", "max_depth 4: reference envelope (block_hashes at depth 5) is malformed", True,
              std(REF), "malformed", max_depth=4)
    e = env_payload("{}")
    hint_case(g, "max-depth-4-flat-admitted", "max_depth 4: payload {} at depth 4 is admitted", True,
              std(e), "admitted", e, max_depth=4)
    hint_case(g, "max-depth-5-reference-admitted", "max_depth 5: reference envelope is admitted", True,
              std(REF), "admitted", REF, max_depth=5)
    hint_case(g, "max-depth-4-deep-prompt-admitted", "max_depth 4 does not apply to the body outside the hint", True,
              B(MODEL(), K("messages", '[{"role":"user","content":[{"type":"text","text":[[[["x"]]]]}]}]'), H(e)),
              "admitted", e, max_depth=4)
    hint_case(g, "max-depth-4-untrusted", "max_depth 4 with the reference envelope in untrusted mode: stripped", False,
              std(REF), "stripped", max_depth=4)
    e = env(extra=[('"x"', deep_arrays(200))])
    hint_case(g, "deep-200-untrusted", "a hint nested 200 deep in untrusted mode: stripped", False, std(e), "stripped")
    hint_case(g, "outside-200-admitted", "nesting 200 deep outside the hint does not matter: admitted", True,
              B(MODEL(), K("deep", deep_objects(200)), H(pretty(REF))), "admitted", REF)


def gen_body():
    g = "body"
    bad = [
        ("not-json", "hello"),
        ("unterminated-string", '{"prompt":"abc}'),
        ("bad-escape-x", r'{"prompt":"\x41"}'),
        ("bad-escape-quote", r'{"prompt":"\'"}'),
        ("short-unicode-escape", r'{"prompt":"\u12"}'),
        ("uppercase-u-escape", r'{"prompt":"\U0041"}'),
        ("raw-tab-in-string", '{"prompt":"a\tb"}'),
        ("raw-newline-in-string", '{"prompt":"a\nb"}'),
        ("raw-unit-separator-in-string", '{"prompt":"a\x1fb"}'),
        ("single-quotes", "{'prompt':'x'}"),
        ("trailing-comma-object", '{"a":1,}'),
        ("trailing-comma-array", '{"a":[1,]}'),
        ("leading-zero", '{"a":01}'),
        ("trailing-dot", '{"a":1.}'),
        ("leading-dot", '{"a":.5}'),
        ("plus-sign", '{"a":+1}'),
        ("missing-colon", '{"a" 1}'),
        ("missing-comma", '{"a":1 "b":2}'),
        ("unquoted-key", "{a:1}"),
        ("comment", '{"a":1 /* c */}'),
        ("unterminated-object", '{"a":1'),
        ("key-without-value", '{"a"}'),
        ("lone-comma", "{,}"),
        ("truncated-literal", '{"a":tru}'),
        ("minus-nan", '{"a":-NaN}'),
        ("lowercase-nan", '{"a":nan}'),
        ("plus-infinity", '{"a":+Infinity}'),
        ("exponent-without-digits", '{"a":1e}'),
        ("minus-alone", '{"a":-}'),
        ("hex-number", '{"a":0x10}'),
        ("non-string-key", "{1:2}"),
        ("lone-close-brace", "}"),
        ("whitespace-only", " \r\n\t"),
        ("trailing-object", "{} {}"),
        ("trailing-garbage", "{}x"),
        ("trailing-brace", "{}}"),
        ("trailing-comma-top", "{},"),
        ("two-arrays", "[] []"),
        ("vertical-tab-whitespace", '{"a":1}\x0b'),
        ("form-feed-whitespace", '\x0c{"a":1}'),
        ("nbsp-whitespace", '{"a":\u00a01}'),
        ("hint-trailing-comma", '{"model":"m","kv_hints":{"protocol_version":"0.1",}}'),
        ("hint-unterminated", '{"model":"m","kv_hints":{"protocol_version":"0.1"'),
        ("hint-single-quotes", "{\"model\":\"m\",\"kv_hints\":{'protocol_version':'0.1'}}"),
        ("trailing-after-hint", '{"kv_hints":' + REF + '} {"kv_hints":null}'),
    ]
    both_modes = ("not-json", "trailing-object", "hint-trailing-comma", "hint-unterminated",
                  "hint-single-quotes", "trailing-after-hint")
    for short, text in bad:
        if short in both_modes:
            for trusted in (False, True):
                t = "-trusted" if trusted else "-untrusted"
                reject(g, short + t, "not JSON (" + short.replace("-", " ") + "): 400", trusted, text)
        else:
            reject(g, short, "not JSON (" + short.replace("-", " ") + "): 400", False, text)
    # A request without a body carries no hint: every host forwards it
    # uninspected (GET, or a POST that ends with its headers), so the rule
    # book does the same and leaves the answer to the worker.
    for trusted in (False, True):
        t = "-trusted" if trusted else "-untrusted"
        add(g, "empty-body" + t, "no body at all: nothing to inspect, forwarded", trusted, b"",
            forward_expect(b"", b"", "no_hint"))
    reject(g, "whitespace-only-body", "a body of whitespace only: 400", False, b" \r\n\t ")
    reject(g, "raw-nul-in-string", "raw NUL byte in a string: 400", False, b'{"prompt":"a\x00b"}')
    reject(g, "trailing-nul", "NUL byte after the object: 400", False, b'{"a":1}\x00')
    for trusted in (False, True):
        t = "-trusted" if trusted else "-untrusted"
        raw_forward(g, "trailing-whitespace" + t, "trailing whitespace after the object is fine", trusted, b'{"a":1} \t\r\n \n')
        raw_forward(g, "array-top-with-hint" + t, "array top level containing an object with kv_hints: unchanged", trusted,
                    ('[{"kv_hints":' + REF + '},{"kv_hints":null}]').encode())
        raw_forward(g, "string-top" + t, "string top level: unchanged", trusted, b'"kv_hints"')
        raw_forward(g, "number-top" + t, "number top level 42: unchanged", trusted, b"42")
        raw_forward(g, "null-top" + t, "null top level: unchanged", trusted, b"null")
    raw_forward(g, "true-top", "true top level: unchanged", False, b" true ")
    raw_forward(g, "empty-array-top", "empty array top level: unchanged", False, b"[]")
    raw_forward(g, "single-digit-top", "one-byte body 7: unchanged", True, b"7")
    raw_forward(g, "nan-top", "NaN as the whole body: unchanged", True, b"NaN")
    hint_case(g, "leading-whitespace-trusted", "leading and trailing whitespace around the object kept", True,
              B(MODEL(), H(pretty(REF)), head=" \r\n\t{", tail="}\n\n"), "admitted", REF)
    hint_case(g, "leading-whitespace-untrusted", "leading and trailing whitespace around the object kept", False,
              B(MODEL(), H(REF), head="\n\n {", tail="} \n"), "stripped")
    hint_case(g, "raw-del-in-prompt", "raw DEL (0x7f) in a string is allowed", False,
              B(MODEL(), K("prompt", '"a\x7fb"'), H(REF)), "stripped")


def utf(text, codec, bom=b""):
    return bom + text.encode(codec)


def gen_encoding():
    g = "encoding"
    pr = pretty(REF)
    hint_case(g, "bom-no-hint-untrusted", "UTF-8 BOM, no hint: forwarded unchanged with the BOM", False,
              B(MODEL(), MSGS(), prefix=BOM), "no_hint")
    hint_case(g, "bom-no-hint-trusted", "UTF-8 BOM, no hint, trusted: unchanged", True,
              B(MODEL(), MSGS(), prefix=BOM), "no_hint")
    hint_case(g, "bom-stripped", "UTF-8 BOM: hint stripped and the BOM kept", False,
              Body(std(REF).members, prefix=BOM), "stripped")
    hint_case(g, "bom-admitted-rewritten", "UTF-8 BOM: pretty hint admitted, rewritten, BOM kept", True,
              Body(std(pr).members, prefix=BOM), "admitted", REF)
    hint_case(g, "bom-admitted-unchanged", "UTF-8 BOM: canonical hint admitted, bytes unchanged", True,
              Body(std(REF).members, prefix=BOM), "admitted", REF)
    hint_case(g, "bom-discarded", "UTF-8 BOM: malformed hint removed, BOM kept", True,
              Body(std('{"protocol_version":"0.1"}').members, prefix=BOM), "malformed")
    hint_case(g, "bom-then-whitespace", "UTF-8 BOM followed by whitespace before the object", False,
              Body([H(REF), MODEL()], head="\n {", tail=" }", prefix=BOM), "stripped")
    hint_case(g, "bom-null-hint-trusted", "UTF-8 BOM with a single null hint, trusted: unchanged", True,
              Body(std("null").members, prefix=BOM), "null")
    raw_forward(g, "bom-array-top", "UTF-8 BOM before an array top level: unchanged", False,
                BOM + b'[{"kv_hints":{}}]')
    hint_case(g, "feff-in-string", "U+FEFF inside a string (not at the start) is just a character", False,
              B(MODEL(), K("prompt", '"\ufeffhello"'), H(REF)), "stripped")
    hint_case(g, "feff-in-hint-admitted", "\\ufeff escape in the hint becomes a raw U+FEFF in the canonical bytes", True,
              std(env_payload(r'{"s":"\ufeff"}')), "admitted", env_payload('{"s":"\ufeff"}'))
    reject(g, "double-bom", "two UTF-8 BOMs: 400", False, BOM + BOM + b"{}")
    reject(g, "bom-only", "a body that is only a BOM: 400", False, BOM)
    reject(g, "bom-whitespace-only", "a BOM and whitespace only: 400", False, BOM + b" \n")
    reject(g, "bom-after-whitespace", "a BOM after leading whitespace: 400", False, b" " + BOM + b"{}")
    reject(g, "bom-inside-object", "a BOM between tokens: 400", False, b"{" + BOM + b'"a":1}')
    body = '{"model":"m","kv_hints":' + REF + "}"
    for short, codec, bom in [("utf16le-bom", "utf-16-le", b"\xff\xfe"), ("utf16be-bom", "utf-16-be", b"\xfe\xff"),
                              ("utf16le-no-bom", "utf-16-le", b""), ("utf16be-no-bom", "utf-16-be", b""),
                              ("utf32le-bom", "utf-32-le", b"\xff\xfe\x00\x00"), ("utf32be-bom", "utf-32-be", b"\x00\x00\xfe\xff"),
                              ("utf32le-no-bom", "utf-32-le", b""), ("utf32be-no-bom", "utf-32-be", b"")]:
        for trusted in (False, True):
            t = "-trusted" if trusted else "-untrusted"
            reject(g, short + t, short.replace("-", " ") + " body: 400 (only UTF-8 is supported; Python would accept it)",
                   trusted, utf(body, codec, bom), python_accepts=True)
    reject(g, "utf16le-bom-array", "UTF-16LE array body: 400", False, utf("[1]", "utf-16-le", b"\xff\xfe"), python_accepts=True)
    invalid = [
        ("lone-continuation", b'{"prompt":"a\x80b"}'),
        ("overlong-solidus", b'{"prompt":"\xc0\xaf"}'),
        ("overlong-three-byte", b'{"prompt":"\xe0\x80\xaf"}'),
        ("truncated-two-byte", b'{"prompt":"\xc3"}'),
        ("truncated-three-byte", b'{"prompt":"\xe2\x82"}'),
        ("above-max-codepoint", b'{"prompt":"\xf4\x90\x80\x80"}'),
        ("byte-ff", b'{"prompt":"\xff"}'),
        ("byte-fe", b'{"prompt":"\xfe\xff"}'),
        ("latin1-text", b'{"prompt":"caf\xe9"}'),
        ("invalid-in-key", b'{"pr\xffompt":"x"}'),
        ("invalid-between-tokens", b'{"a":1,\x80"b":2}'),
        ("invalid-truncated-at-end", b'{"a":1}\xe2\x82'),
    ]
    for short, raw in invalid:
        reject(g, "invalid-utf8-" + short, "invalid UTF-8 (" + short.replace("-", " ") + ") outside the hint: 400", False, raw)
    # UTF-8-encoded surrogates: json.loads decodes bytes with surrogatepass,
    # so ED A0..BF 80..BF is read as a lone surrogate; anything else UTF-8
    # forbids stays a 400.
    for trusted in (False, True):
        t = "-trusted" if trusted else "-untrusted"
        hint_case(g, "encoded-surrogate-in-prompt" + t, "encoded surrogate ED A0 80 in the prompt is read, as Python does: unchanged", trusted,
                  B(MODEL(), K("prompt", '"a\ud800b"'), MSGS()), "no_hint")
        hint_case(g, "encoded-surrogate-pair-in-prompt" + t, "two encoded surrogates (ED A0 BD ED B8 80) in the prompt stay two characters: unchanged", trusted,
                  B(MODEL(), K("prompt", '"\ud83d\ude00"'), MSGS()), "no_hint")
        hint_case(g, "encoded-surrogate-in-key" + t, "encoded surrogate ED BF BF in a top-level key: unchanged", trusted,
                  B(MODEL(), M('"\udfff"', "1"), MSGS()), "no_hint")
    hint_case(g, "encoded-surrogate-next-to-hint-trusted", "encoded surrogate in the prompt next to a valid hint: admitted", True,
              B(MODEL(), K("prompt", '"\udc00"'), H(pretty(REF))), "admitted", REF)
    hint_case(g, "encoded-surrogate-next-to-hint-untrusted", "encoded surrogate in the prompt next to a hint: stripped", False,
              B(MODEL(), K("prompt", '"\udc00"'), H(REF)), "stripped")
    hint_case(g, "encoded-surrogate-in-hint-untrusted", "encoded surrogate inside an untrusted hint never fails the request: stripped", False,
              std(env_payload('{"s":"\ud800","\udbff":1}')), "stripped")
    hint_case(g, "encoded-surrogate-hint-value-untrusted", "a hint value that is a string of encoded surrogates: stripped", False,
              std('"\ud800\udfff"'), "stripped")
    hint_case(g, "encoded-surrogate-in-payload-trusted", "encoded surrogate in a payload string: malformed (not valid UTF-8)", True,
              std(env_payload('{"s":"x\ud800"}')), "malformed")
    hint_case(g, "encoded-surrogate-pair-in-payload-trusted", "two encoded surrogates in a payload string: malformed", True,
              std(env_payload('{"s":"\ud83d\ude00"}')), "malformed")
    hint_case(g, "encoded-surrogate-in-payload-key-trusted", "encoded surrogate in a payload key: malformed", True,
              std(env_payload('{"\udfff":1}')), "malformed")
    hint_case(g, "encoded-surrogate-in-message-id-trusted", "encoded surrogate in message_id: malformed", True,
              std(env({"message_id": '"m\udc00"'})), "malformed")
    hint_case(g, "encoded-surrogate-in-version-trusted", "encoded surrogate in protocol_version: unknown_version", True,
              std(env({"protocol_version": '"0.1\ud800"'})), "unknown_version")
    for short, raw in [("truncated", b'"\xed\xa0"'), ("cut-by-ascii", b'"\xed\xa0A"'), ("bad-third-byte", b'"\xed\xbf\xc0"'),
                       ("at-end-of-body", b'"\xed\xa0'), ("outside-string", b"\xed\xa0\x80")]:
        reject(g, "invalid-utf8-surrogate-" + short, "an encoded surrogate " + short.replace("-", " ") + " is not what Python reads: 400",
               False, b'{"prompt":' + raw + b"}")
    hint = REF.encode()
    reject(g, "invalid-utf8-next-to-hint-trusted", "invalid UTF-8 in the prompt next to a valid hint, trusted: 400", True,
           b'{"prompt":"\xff","kv_hints":' + hint + b"}")
    reject(g, "invalid-utf8-next-to-hint-untrusted", "invalid UTF-8 in the prompt next to a hint, untrusted: 400", False,
           b'{"kv_hints":' + hint + b',"prompt":"\xc3\x28"}')


def gzip_stored(data):
    """A gzip member using a stored deflate block: deterministic without zlib."""
    hdr = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
    blk = b"\x01" + struct.pack("<HH", len(data), len(data) ^ 0xFFFF) + data
    out = hdr + blk + struct.pack("<II", binascii.crc32(data) & 0xFFFFFFFF, len(data))
    assert gzip.decompress(out) == data
    return out


def padded(total, hint=None, trusted_pretty=False):
    """A body of exactly `total` bytes: {"model":"m",[hint,]"prompt":"xxx..."}."""
    members = [MODEL()] + ([H(hint)] if hint is not None else [])
    probe = B(*members, K("prompt", '""')).render()
    pad = total - len(probe)
    assert pad >= 0
    b = B(*members, K("prompt", '"' + ("0123456789abcdef" * (pad // 16 + 1))[:pad] + '"'))
    assert len(b.render()) == total
    return b


def gen_http():
    g = "http"
    for trusted in (False, True):
        t = "-trusted" if trusted else "-untrusted"
        reject(g, "body-1025-over-1024" + t, "max_body_bytes 1024 and a 1025-byte body: 413", trusted,
               padded(1025, REF).render(), status=413, max_body=1024)
    hint_case(g, "body-1024-at-limit-untrusted", "max_body_bytes 1024 and a 1024-byte body: forwarded, hint stripped", False,
              padded(1024, REF), "stripped", max_body=1024)
    hint_case(g, "body-1024-at-limit-trusted", "max_body_bytes 1024 and a 1024-byte body: admitted", True,
              padded(1024, pretty(REF)), "admitted", REF, max_body=1024)
    hint_case(g, "body-1023-under-limit", "max_body_bytes 1024 and a 1023-byte body without hint: unchanged", False,
              padded(1023), "no_hint", max_body=1024)
    reject(g, "body-1025-no-hint", "max_body_bytes 1024 and a 1025-byte body without hint: 413", False,
           padded(1025).render(), status=413, max_body=1024)
    gz = gzip_stored(std(REF).render())
    for trusted in (False, True):
        t = "-trusted" if trusted else "-untrusted"
        reject(g, "gzip-415" + t, "content-encoding gzip (a real gzip body): 415", trusted, gz, status=415,
               headers={"content-type": "application/json", "content-encoding": "gzip"})
    reject(g, "br-415", "content-encoding br: 415 (body not inspected)", False, std(REF).render(), status=415,
           headers={"content-type": "application/json", "content-encoding": "br"})
    reject(g, "deflate-415", "content-encoding deflate: 415", True, std(REF).render(), status=415,
           headers={"content-type": "application/json", "content-encoding": "deflate"})
    reject(g, "gzip-plain-json-415", "content-encoding gzip on a plain JSON body: 415", False, b"{}", status=415,
           headers={"content-type": "application/json", "content-encoding": "gzip"})
    hint_case(g, "identity-untrusted", "content-encoding identity is accepted and inspected", False,
              std(REF), "stripped", headers={"content-type": "application/json", "content-encoding": "identity"})
    hint_case(g, "identity-trusted", "content-encoding identity is accepted and inspected (trusted)", True,
              std(pretty(REF)), "admitted", REF, headers={"content-type": "application/json", "content-encoding": "identity"})
    for short, path in [("completions", "/v1/completions"), ("responses", "/v1/responses"), ("health", "/health"),
                        ("chat-query", "/v1/chat/completions?stream=true"), ("root", "/"),
                        ("percent-encoded", "/v1/%63hat/completions"), ("double-slash", "//v1//chat/completions"),
                        ("unknown", "/not/a/route")]:
        hint_case(g, "path-" + short + "-untrusted", "path " + path + " is inspected: stripped", False,
                  std(REF), "stripped", path=path)
    for short, path in [("completions", "/v1/completions"), ("responses", "/v1/responses"), ("health", "/health")]:
        hint_case(g, "path-" + short + "-trusted", "path " + path + " is inspected: admitted and rewritten", True,
                  std(pretty(REF)), "admitted", REF, path=path)
    hint_case(g, "method-get-with-body", "GET /health with a JSON body is inspected", False,
              std(REF), "stripped", method="GET", path="/health")
    hint_case(g, "method-put", "PUT with a body is inspected", False, std(REF), "stripped", method="PUT")
    hint_case(g, "method-patch-trusted", "PATCH with a body is inspected (trusted)", True,
              std(pretty(REF)), "admitted", REF, method="PATCH")
    for short, hdrs in [("text-plain", {"content-type": "text/plain"}), ("no-content-type", {}),
                        ("form", {"content-type": "application/x-www-form-urlencoded"}),
                        ("json-charset", {"content-type": "application/json; charset=utf-8"}),
                        ("octet-stream", {"content-type": "application/octet-stream"})]:
        hint_case(g, "content-type-" + short, "content-type is ignored (" + (hdrs.get("content-type") or "absent") + "): inspected",
                  False, std(REF), "stripped", headers=hdrs)
    hint_case(g, "content-type-text-plain-trusted", "content-type text/plain, trusted: admitted", True,
              std(pretty(REF)), "admitted", REF, headers={"content-type": "text/plain"})
    reject(g, "content-type-text-plain-invalid", "text/plain content-type does not exempt a non-JSON body: 400", False,
           b"hello kv_hints", headers={"content-type": "text/plain"})


GRPC_CT = {"content-type": "application/grpc"}


def grpc_frame(msg, flag=0):
    """One gRPC message: the flag byte, the big-endian length, the message."""
    return bytes([flag]) + struct.pack(">I", len(msg)) + msg


def is_grpc_ct(v):
    """application/grpc or application/grpc+<subtype>, parameters allowed,
    any letter case (not application/grpc-web)."""
    return re.fullmatch(r"[ \t]*application/grpc(\+[^;\s]+)?[ \t]*(;.*)?", v, re.IGNORECASE | re.DOTALL) is not None


def uninspected(group, short, desc, trusted, req, headers=GRPC_CT, **http):
    """A gRPC request that passes uninspected: forwarded unchanged, counted.
    By the rule of DESIGN.md 4 it must carry a gRPC content type, start with
    a gRPC message prefix, and be a body json.loads cannot read."""
    assert is_grpc_ct(headers.get("content-type", "")), name_of(group, short)
    assert len(req) >= 5 and req[0] in (0, 1), name_of(group, short)
    assert not py_accepts(req), name_of(group, short)
    e = forward_expect(req, req, "uninspected", ctr=counters(grpc_uninspected=1))
    add(group, short, desc, trusted, req, e, headers=headers, **http)


def refused(group, short, desc, trusted, req, headers=GRPC_CT, **http):
    """A gRPC request under "grpc": "refuse": answered HTTP 200 with
    grpc-status 7 (PERMISSION_DENIED), nothing forwarded, counted."""
    assert is_grpc_ct(headers.get("content-type", "")), name_of(group, short)
    exp = {"action": "reject", "status": 200, "grpc_status": 7, "outcome": "refused", "reason": None,
           "counters": counters(grpc_refused=1)}
    add(group, short, desc, trusted, req, exp, headers=headers, grpc="refuse", **http)


def gen_grpc():
    g = "grpc"
    # A protobuf message: field 1 (string "llama"), field 2 (varint 16).
    msg = b"\x0a\x05llama\x10\x10"
    for trusted in (False, True):
        t = "-trusted" if trusted else "-untrusted"
        uninspected(g, "unary" + t, "a gRPC request (application/grpc, one message) passes uninspected", trusted,
                    grpc_frame(msg))
    for short, ct in [("proto", "application/grpc+proto"), ("json-codec", "application/grpc+json"),
                      ("parameters", "application/grpc; charset=utf-8"), ("letter-case", "Application/GRPC+Proto")]:
        uninspected(g, "content-type-" + short, "content-type " + ct + " is gRPC: passes uninspected", False,
                    grpc_frame(msg), headers={"content-type": ct})
    uninspected(g, "json-codec-message-with-hint", "application/grpc+json: a JSON message inside a gRPC frame is not "
                "a JSON body (json.loads cannot read the frame): passes uninspected", False,
                grpc_frame(b'{"kv_hints":' + REF.encode() + b"}"), headers={"content-type": "application/grpc+json"})
    uninspected(g, "compressed", "a compressed message (flag 1) passes uninspected", False,
                grpc_frame(gzip_stored(msg), flag=1))
    uninspected(g, "empty-message", "an empty message (the 5-byte prefix only) passes uninspected", False,
                grpc_frame(b""))
    uninspected(g, "several-messages", "client streaming: several messages pass uninspected", False,
                grpc_frame(msg) + grpc_frame(b"\x10\x01") + grpc_frame(b"", flag=0))
    # Messages whose length bytes, decoded as Python would (UTF-32-BE), start
    # like a JSON text: the next unit decides.
    uninspected(g, "length-reads-as-tab", "a 2,305-byte message: its prefix reads as UTF-32-BE tab, then an "
                "undecodable unit: passes uninspected", False, grpc_frame(b"\x0a" * 0x901))
    uninspected(g, "length-reads-as-quote", "an 8,705-byte message: its prefix reads as UTF-32-BE '\"', then an "
                "undecodable unit: passes uninspected", False, grpc_frame(b"\x0a" * 0x2201))
    uninspected(g, "length-reads-as-space-then-nul", "an 8,192-byte message of zeros: UTF-32-BE space, then NUL: "
                "passes uninspected", False, grpc_frame(bytes(0x2000)))
    # JSON labelled gRPC: the bytes decide, not the label.
    body = '{"model":"m","kv_hints":' + REF + "}"
    for short, codec, bom in [("utf32be", "utf-32-be", b""), ("utf32be-bom", "utf-32-be", b"\x00\x00\xfe\xff"),
                              ("utf16be", "utf-16-be", b"")]:
        for trusted in (False, True):
            t = "-trusted" if trusted else "-untrusted"
            reject(g, short + "-json-labelled-grpc" + t, short + " JSON with a hint labelled application/grpc: "
                   "Python reads it, so it is inspected: 400 (only UTF-8 is supported), as grpc-status 3", trusted,
                   utf(body, codec, bom), python_accepts=True, headers=GRPC_CT)
    reject(g, "utf32be-json-after-whitespace-labelled-grpc", "UTF-32-BE JSON after whitespace, labelled gRPC: 400 "
           "as grpc-status 3",
           False, utf(" \n\t" + body, "utf-32-be"), python_accepts=True, headers=GRPC_CT)
    reject(g, "utf32be-number-labelled-grpc", "a UTF-32-BE number labelled gRPC: 400 as grpc-status 3", False,
           utf("12345", "utf-32-be"), python_accepts=True, headers=GRPC_CT)
    hint_case(g, "utf8-json-labelled-grpc-untrusted", "UTF-8 JSON labelled application/grpc is inspected: stripped",
              False, std(REF), "stripped", headers=GRPC_CT)
    hint_case(g, "utf8-json-labelled-grpc-trusted", "UTF-8 JSON labelled application/grpc+proto is inspected: admitted",
              True, std(pretty(REF)), "admitted", REF, headers={"content-type": "application/grpc+proto"})
    reject(g, "too-short", "three bytes labelled gRPC: not a message prefix, inspected: 400 as grpc-status 3", False,
           b"\x00\x00\x00", headers=GRPC_CT)
    reject(g, "bad-flag", "flag byte 2: not a gRPC message, inspected: 400 as grpc-status 3", False,
           b"\x02" + grpc_frame(msg)[1:], headers=GRPC_CT)
    reject(g, "grpc-web-not-grpc", "application/grpc-web is not gRPC: inspected: 400 (a JSON error)", False,
           grpc_frame(msg), headers={"content-type": "application/grpc-web+proto"})
    reject(g, "gzip-415", "content-encoding gzip on a gRPC request: 415 as grpc-status 12", False, grpc_frame(msg), status=415,
           headers={"content-type": "application/grpc", "content-encoding": "gzip"})
    # "grpc": "refuse": answered the gRPC way, whatever the body.
    for trusted in (False, True):
        t = "-trusted" if trusted else "-untrusted"
        refused(g, "refuse-unary" + t, '"grpc": "refuse": a gRPC request gets HTTP 200, grpc-status 7', trusted,
                grpc_frame(msg))
    refused(g, "refuse-json-labelled-grpc", '"grpc": "refuse": JSON labelled gRPC is refused too', False,
            std(REF).render())
    refused(g, "refuse-proto", '"grpc": "refuse": application/grpc+proto', False, grpc_frame(msg),
            headers={"content-type": "application/grpc+proto"})
    refused(g, "refuse-empty-body", '"grpc": "refuse": a gRPC request without a body is refused too', False, b"")
    refused(g, "refuse-before-415", '"grpc": "refuse": refused before the content-encoding is looked at', False,
            grpc_frame(msg), headers={"content-type": "application/grpc", "content-encoding": "gzip"})
    hint_case(g, "refuse-json-untouched", '"grpc": "refuse": a JSON request is filtered as ever', False,
              std(REF), "stripped", grpc="refuse")
    hint_case(g, "refuse-json-trusted", '"grpc": "refuse", trusted: a JSON request is admitted as ever', True,
              std(pretty(REF)), "admitted", REF, grpc="refuse")


def gen_large():
    g = "large"
    unit = "lorem ipsum dolor sit amet, "
    prompt = (unit * (MIB // len(unit) + 1))[:MIB]
    assert len(prompt) == MIB
    hint_case(g, "prompt-1mib-hint-middle-trusted", "1 MiB prompt, pretty hint in the middle: admitted and rewritten", True,
              B(MODEL(), K("prompt", '"' + prompt + '"'), H(pretty(REF)), K("max_tokens", "16")), "admitted", REF)
    hint_case(g, "prompt-1mib-hint-middle-untrusted", "1 MiB prompt, hint in the middle: stripped", False,
              B(MODEL(), K("prompt", '"' + prompt + '"'), H(REF), K("max_tokens", "16")), "stripped")
    deep = deep_arrays(5000)
    hint_case(g, "deep-5000-outside-untrusted", "5,000 levels of nesting in another field: forwarded, hint stripped", False,
              B(MODEL(), K("deep", deep), H(REF), MSGS()), "stripped")
    hint_case(g, "deep-5000-outside-trusted", "5,000 levels of nesting in another field: hint admitted", True,
              B(MODEL(), H(pretty(REF)), K("deep", deep)), "admitted", REF)
    hint_case(g, "deep-5000-outside-no-hint", "5,000 levels of objects in another field, no hint: unchanged", True,
              B(MODEL(), K("deep", deep_objects(5000))), "no_hint")
    hint_case(g, "deep-5000-inside-hint-trusted", "5,000 levels of nesting inside the payload: malformed", True,
              std(env_payload('{"x":' + deep + "}")), "malformed")
    hint_case(g, "deep-5000-inside-hint-untrusted", "5,000 levels of nesting inside the hint: stripped", False,
              std(env_payload('{"x":' + deep + "}")), "stripped")
    hint_case(g, "deep-5000-hint-value-untrusted", "a hint value that is 5,000 nested arrays: stripped", False,
              std(deep), "stripped")
    hint_case(g, "deep-5000-hint-value-trusted", "a hint value that is 5,000 nested arrays: malformed (not an object)", True,
              std(deep), "malformed")
    members = [K("f%04d" % i, str(i)) for i in range(2000)]
    hint_case(g, "many-members-hint-last", "2,000 top-level members, hint last: stripped", False,
              B(*members, H(REF)), "stripped")
    hint_case(g, "many-members-hint-middle-trusted", "2,000 top-level members, hint in the middle: admitted", True,
              B(*members[:1000], H(pretty(REF)), *members[1000:]), "admitted", REF)
    tricky = '"' + '\\\\\\"' * 8000 + '"'
    assert isinstance(json.loads(tricky), str)
    hint_case(g, "escaped-quotes-before-hint", "a prompt of 8,000 escaped backslash+quote pairs, then the hint", False,
              B(MODEL(), K("prompt", tricky), H(REF)), "stripped")
    hint_case(g, "escaped-quotes-before-hint-trusted", "8,000 escaped backslash+quote pairs, then the hint (trusted)", True,
              B(K("prompt", tricky), H(pretty(REF)), MODEL()), "admitted", REF)


# ---------------------------------------------------------------------------
# Trusted senders (docs/spec.md, Trusted senders): the same admission, with
# trust decided per request from the sender's connection properties.
# ---------------------------------------------------------------------------

ROUTER = "spiffe://cluster.local/ns/llm/sa/router"

# One rule list for the whole group, so that every case runs under the same
# plugin configuration.  127.0.0.0/8 is deliberately not listed.
SENDER_RULES = [
    {"principal": ROUTER},
    {"principal": "spiffe://cluster.local/ns/batch/sa/*"},
    {"dns_name": "router.llm.svc"},
    {"source_cidr": "10.8.0.0/16"},
    {"source_cidr": "2001:db8:7::/48"},
    {"principal": "spiffe://cluster.local/ns/edge/sa/gateway", "source_cidr": "192.168.4.0/24"},
]


def sender_trusted(rules, sender):
    """The rule as the spec states it: a rule matches when every member it
    sets matches; principal and dns_name need a verified client certificate
    (mtls true); principal is exact, or a prefix when it ends in "/*" (the
    URI must go on past the prefix); source_cidr holds the connection's
    address, an IPv4-mapped IPv6 address counting as its IPv4 form."""
    import ipaddress
    mtls = sender["mtls"] is True
    addr = None
    src = sender["source_address"]
    if src is not None:
        host, _, port = src.rpartition(":")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        try:
            addr = ipaddress.ip_address(host)
            if addr.version == 6 and addr.ipv4_mapped is not None:
                addr = addr.ipv4_mapped
        except ValueError:
            addr = None
    for r in rules:
        ok = True
        if "principal" in r:
            uri = sender["uri_san"] if mtls else None
            p = r["principal"]
            if p.endswith("/*"):
                ok = ok and uri is not None and uri.startswith(p[:-1]) and len(uri) > len(p) - 1
            else:
                ok = ok and uri == p
        if "dns_name" in r:
            ok = ok and mtls and sender["dns_san"] == r["dns_name"]
        if "source_cidr" in r:
            net = ipaddress.ip_network(r["source_cidr"])
            ok = ok and addr is not None and addr.version == net.version and addr in net
        if ok:
            return True
    return False


def gen_senders():
    g = "senders"

    def sender(mtls=None, uri=None, dns=None, src=None):
        return {"mtls": mtls, "uri_san": uri, "dns_san": dns, "source_address": src}

    def case(short, desc, snd, verdict, body=None, hint_verdict=None, canonical=None):
        """verdict: "trusted" or "untrusted", checked against the model;
        the body (default: the reference envelope, pretty-printed, so that
        admission visibly rewrites it) then takes the trusted or untrusted
        path of hint_case."""
        trusted = sender_trusted(SENDER_RULES, snd)
        assert verdict == ("trusted" if trusted else "untrusted"), (short, verdict)
        if body is None:
            body = std(pretty(REF))
            if hint_verdict is None:
                hint_verdict, canonical = ("admitted", REF) if trusted else ("stripped", None)
        hint_case(g, short, desc, trusted, body, hint_verdict, canonical)
        c = GROUPS[g].pop()
        ordered = {}
        for k, v in c.items():
            ordered[k] = v
            if k == "trusted":
                ordered["trusted_senders"] = SENDER_RULES
                ordered["sender"] = snd
        GROUPS[g].append(ordered)

    case("router-principal", "the router's SPIFFE ID, verified: trusted, its envelope admitted",
         sender(True, ROUTER, None, "127.0.0.1:41000"), "trusted")
    case("router-principal-unverified", "the router's URI SAN without a verified certificate (mtls false): untrusted",
         sender(False, ROUTER, None, "127.0.0.1:41000"), "untrusted")
    case("router-principal-mtls-absent", "the router's URI SAN while connection.mtls is absent: untrusted",
         sender(None, ROUTER, None, "127.0.0.1:41000"), "untrusted")
    case("other-principal", "a verified certificate with another workload's SPIFFE ID: untrusted",
         sender(True, "spiffe://cluster.local/ns/llm/sa/client", None, "127.0.0.1:41000"), "untrusted")
    case("principal-longer", "the router's ID with a suffix: exact principals match exactly",
         sender(True, ROUTER + "-2", None, "127.0.0.1:41000"), "untrusted")
    case("prefix-principal", "a principal below a \"/*\" prefix: trusted",
         sender(True, "spiffe://cluster.local/ns/batch/sa/job7", None, "127.0.0.1:41000"), "trusted")
    case("prefix-principal-itself", "the prefix itself, with nothing after the slash: untrusted",
         sender(True, "spiffe://cluster.local/ns/batch/sa/", None, "127.0.0.1:41000"), "untrusted")
    case("prefix-principal-no-slash", "the prefix without its final slash: untrusted",
         sender(True, "spiffe://cluster.local/ns/batch/sa", None, "127.0.0.1:41000"), "untrusted")
    case("prefix-principal-sibling", "a sibling namespace that shares the prefix's text: untrusted",
         sender(True, "spiffe://cluster.local/ns/batchx/sa/job7", None, "127.0.0.1:41000"), "untrusted")
    case("dns-name", "the router's DNS SAN, verified: trusted",
         sender(True, None, "router.llm.svc", "127.0.0.1:41000"), "trusted")
    case("dns-name-unverified", "the router's DNS SAN without a verified certificate: untrusted",
         sender(False, None, "router.llm.svc", "127.0.0.1:41000"), "untrusted")
    case("dns-name-in-uri-san", "the DNS name presented as a URI SAN: untrusted",
         sender(True, "router.llm.svc", None, "127.0.0.1:41000"), "untrusted")
    case("cidr-ipv4", "no certificate, source address inside an IPv4 rule: trusted",
         sender(False, None, None, "10.8.3.4:52000"), "trusted")
    case("cidr-ipv4-outside", "no certificate, source address outside every rule: untrusted",
         sender(False, None, None, "10.9.0.1:52000"), "untrusted")
    case("cidr-ipv4-mapped", "an IPv4-mapped IPv6 source address inside an IPv4 rule: trusted",
         sender(False, None, None, "[::ffff:10.8.0.1]:52000"), "trusted")
    case("cidr-ipv6", "an IPv6 source address inside an IPv6 rule: trusted",
         sender(False, None, None, "[2001:db8:7::42]:443"), "trusted")
    case("cidr-ipv6-outside", "an IPv6 source address outside the IPv6 rule: untrusted",
         sender(False, None, None, "[2001:db8:8::42]:443"), "untrusted")
    case("principal-and-cidr", "principal and source_cidr both match: trusted",
         sender(True, "spiffe://cluster.local/ns/edge/sa/gateway", None, "192.168.4.20:5000"), "trusted")
    case("principal-cidr-outside", "principal matches but the source address is outside the rule's CIDR: untrusted",
         sender(True, "spiffe://cluster.local/ns/edge/sa/gateway", None, "192.168.5.20:5000"), "untrusted")
    case("principal-source-absent", "principal matches but source.address is absent: untrusted",
         sender(True, "spiffe://cluster.local/ns/edge/sa/gateway", None, None), "untrusted")
    case("no-properties", "no property at all: untrusted",
         sender(None, None, None, None), "untrusted")
    case("trusted-malformed", "a trusted sender's malformed envelope is discarded as malformed, not untrusted",
         sender(True, ROUTER, None, "127.0.0.1:41000"), "trusted",
         body=std(env({"message_id": DROP})), hint_verdict="malformed")
    case("untrusted-null-hint", "an untrusted sender's null hint is removed, not counted",
         sender(False, None, None, "127.0.0.1:41000"), "untrusted",
         body=std("null"), hint_verdict="null_hint")
    case("trusted-no-hint", "a trusted sender's body without kv_hints is forwarded unchanged",
         sender(True, ROUTER, None, "127.0.0.1:41000"), "trusted",
         body=B(MODEL(), MSGS()), hint_verdict="no_hint")


# ---------------------------------------------------------------------------
# Router-only fields (docs/spec.md, Router-only fields; docs/router-only.md).
# ---------------------------------------------------------------------------

# The presets as docs/router-only.md lists them: (member paths, headers).
# The filter's own table must make the same fields (filter/vectors_test.go).
PRESETS = {
    "vllm": (["kv_transfer_params", "ec_transfer_params"], ["x-data-parallel-rank"]),
    "sglang": (["bootstrap_host", "bootstrap_port", "bootstrap_room", "bootstrap_pair_key", "decode_tp_size",
                "routed_dp_rank", "disagg_prefill_dp_rank", "data_parallel_rank", "kv_router_hint"],
               ["x-data-parallel-rank"]),
    "trtllm": (["disaggregated_params", "prompt_token_ids", "prompt_token_ids_b64"],
               ["x-trtllm-disagg-auth", "x-trtllm-subagent-affinity-id"]),
    "dynamo": (["nvext.backend_instance_id", "nvext.decode_worker_id", "nvext.prefill_worker_id", "nvext.dp_rank",
                "nvext.prefill_dp_rank", "nvext.token_data", "nvext.use_raw_prompt"],
               ["x-dynamo-worker-instance-id", "x-dynamo-prefill-instance-id", "x-dynamo-dp-rank",
                "x-dynamo-prefill-dp-rank", "x-worker-instance-id", "x-prefill-instance-id", "x-dp-rank",
                "x-data-parallel-rank", "x-prefill-dp-rank"]),
    "llm-d": ([], ["x-prefiller-host-port", "x-prefiller-url", "x-kv-cache-source-host-port", "x-encoder-hosts-ports",
                   "x-data-parallel-host-port"]),
}
ENGINES = ["vllm", "sglang", "trtllm", "dynamo", "llm-d"]


def ro_split(cfg):
    """The configuration's member paths and header names, presets first in
    the order named, then the operator's, each once."""
    members, headers = [], []
    for e in cfg.get("engines", []):
        pm, ph = PRESETS[e]
        members += [m for m in pm if m not in members]
        headers += [h for h in ph if h not in headers]
    members += [m for m in cfg.get("members", []) if m not in members]
    headers += [h.lower() for h in cfg.get("headers", []) if h.lower() not in headers]
    return members, headers


def ro_fields(cfg):
    m, h = ro_split(cfg)
    return m + h


class NB:
    """A nested object value built from members (M), rendered like Body."""

    def __init__(self, *members, head="{", tail="}"):
        self.members, self.head, self.tail = list(members), head, tail


def ro_render(head, members, tail, paths, prefix, found, top):
    """The object's text with every member a path names at this level
    removed (at the top level, of an untrusted body, kv_hints too), and the
    members that are levels of deeper paths rewritten the same way. The
    first kept member loses its separator; every other keeps its own."""
    parts, kept = [head], 0
    for m in members:
        name = json.loads(m.key)
        path = prefix + name
        if path in paths or (top and name == "kv_hints"):
            if path in paths:
                found.add(path)
            continue
        if kept:
            parts.append(m.sep)
        kept += 1
        parts.append(m.key + m.colon)
        v = m.value
        if isinstance(v, NB):
            if any(p.startswith(path + ".") for p in paths):
                v = ro_render(v.head, v.members, v.tail, paths, path + ".", found, False)
            else:
                v = ro_render(v.head, v.members, v.tail, set(), path + ".", set(), False)
        parts.append(v)
    parts.append(tail)
    return "".join(parts)


def ro_text(body):
    return ro_render(body.head, body.members, body.tail, set(), "", set(), False).encode("utf-8")


def ro_case(short, desc, cfg, members, trusted=False, headers=None, head="{", tail="}", outcome=None):
    """A router-only case: the body (members, values str or NB) and request
    headers under router_only cfg, expectations derived from the paths."""
    g = "router-only"
    body = Body(members, head=head, tail=tail)
    req = ro_text(body)
    assert py_accepts(req), short
    mpaths, hnames = ro_split(cfg)
    hdrs = dict(JSON_CT)
    hdrs["x-client-tag"] = "req-" + short
    hdrs.update(headers or {})
    hints = [m for m in members if json.loads(m.key) == "kv_hints"]
    found = set()
    fwd = ro_render(head, members, tail, set() if trusted else set(mpaths), "", found, not trusted).encode("utf-8")
    hfound = [h for h in hnames if any(k.lower() == h for k in hdrs)] if not trusted else []
    all_found = sorted(found) + sorted(hfound)
    removed = ",".join(f + "=1" for f in sorted(all_found))
    refuse = cfg.get("untrusted") == "refuse"
    # What the worker would read of the hint: the last of duplicates.
    last_null = bool(hints) and parse_raw(hints[-1].value) is None
    if trusted:
        assert not hints, short
        fwd = req
        exp = forward_expect(req, fwd, "no_hint", ctr=counters())
    elif refuse and all_found:
        assert not hints, short  # DetectCase relies on it (tests/vectors/vectors.go)
        exp = {"action": "reject", "status": 400, "outcome": "rejected", "reason": None,
               "counters": counters(router_only_refused=1), "router_only_found": removed}
        add(g, short, desc, trusted, req, exp, headers=hdrs, router_only=cfg)
        return
    elif hints and not last_null:
        exp = forward_expect(req, fwd, "stripped", "untrusted", ctr=counters(untrusted=1, router_only_removed=removed))
    elif hints:
        exp = forward_expect(req, fwd, "null_hint", ctr=counters(router_only_removed=removed))
    else:
        exp = forward_expect(req, fwd, "no_hint", ctr=counters(router_only_removed=removed))
    if outcome is not None:
        assert exp["outcome"] == outcome, (short, exp["outcome"])
    # Router-only headers never reach the worker from an untrusted sender;
    # every other header does, as sent.
    eh = {"x-client-tag": hdrs["x-client-tag"]}
    for k, v in (headers or {}).items():
        eh[k.lower()] = None if k.lower() in hfound else v
    exp["headers"] = eh
    assert py_accepts(fwd), short
    add(g, short, desc, trusted, req, exp, headers=hdrs, router_only=cfg)


def gen_router_only():
    ALL = {"engines": ENGINES}
    OWN = {"members": ["my_field", "a.b.c", "route"], "headers": ["X-My-Router"]}
    REFUSE = {"engines": ["vllm", "llm-d"], "untrusted": "refuse"}
    KTP = '{"do_remote_prefill":true,"remote_engine_id":"e1","remote_host":"10.0.0.9","remote_port":5600,"remote_block_ids":[1,2]}'
    # Every preset member, at the top level or at its path, in a chat body.
    for e in ENGINES:
        for path in PRESETS[e][0]:
            short = "preset-" + e.replace("-", "") + "-" + path.replace("_", "-").replace(".", "-")
            if "." in path:
                top, leaf = path.split(".")
                val = NB(K("ignore_eos", "true"), K(leaf, "7"), K("annotations", '["x"]'))
                ro_case(short, "the %s preset: %s is removed, the rest of %s stays" % (e, path, top), ALL,
                        [MODEL(), MSGS(), K(top, val)])
            else:
                ro_case(short, "the %s preset: the top-level member %s is removed" % (e, path), ALL,
                        [MODEL(), K(path, KTP), MSGS()])
        for h in PRESETS[e][1]:
            short = "preset-" + e.replace("-", "") + "-header-" + h
            ro_case(short, "the %s preset: every value of the header %s is removed" % (e, h), ALL,
                    [MODEL(), MSGS()], headers={h: "10.0.0.9:8000"})
    ro_case("no-field", "a body without router-only fields goes on unchanged", ALL, [MODEL(), MSGS()], outcome="no_hint")
    ro_case("escaped-key", "an escaped spelling of a router-only name (kv\\u005ftransfer_params) is removed", ALL,
            [MODEL(), M('"kv\\u005ftransfer_params"', KTP), MSGS()])
    ro_case("escaped-every-char", "a name spelled entirely in escapes is removed", ALL,
            [MODEL(), M('"' + "".join("\\u%04x" % ord(ch) for ch in "bootstrap_room") + '"', "12345"), MSGS()])
    ro_case("escaped-nested", "an escaped spelling of a nested path's names is removed", ALL,
            [MODEL(), M('"nv\\u0065xt"', NB(M('"dp\\u005frank"', "1"), K("k", "2"))), MSGS()])
    ro_case("case-differs", "member names are case-sensitive, as json.loads reads them: KV_TRANSFER_PARAMS stays", ALL,
            [MODEL(), K("KV_TRANSFER_PARAMS", "1"), MSGS()])
    ro_case("duplicates", "every duplicate goes (json.loads keeps the last)", ALL,
            [K("kv_transfer_params", "1"), MODEL(), K("kv_transfer_params", "2"), MSGS(), K("kv_transfer_params", KTP)])
    ro_case("first-member", "the first member removed, with the separator after it", ALL,
            [K("bootstrap_host", '"10.0.0.9"', sep=", "), MODEL(sep=" ,\n "), MSGS()])
    ro_case("last-member", "the last member removed, with the separator before it", ALL,
            [MODEL(), MSGS(sep=" , "), K("bootstrap_port", "8998", sep=" ,\t", colon=" : ")], tail=" }")
    ro_case("only-member", "the only member removed: an empty object", ALL,
            [K("disaggregated_params", '{"request_type":"generation_only","ctx_request_id":7}', colon=" : ")],
            head="{ ", tail=" }")
    ro_case("all-removed", "every member is router-only", ALL,
            [K("bootstrap_host", '"h"'), K("bootstrap_port", "1", sep=" , "), K("bootstrap_room", "2", sep=",\n")])
    ro_case("pretty", "a pretty-printed body", ALL,
            [K("model", '"m"', sep=""), K("kv_transfer_params", '{\n    "remote_host": "h"\n  }', sep=",\n  ", colon=": "),
             K("messages", "[]", sep=",\n  ", colon=": ")], head="{\n  ", tail="\n}")
    ro_case("with-hint", "kv_hints and router-only members, interleaved, all removed; the hint counted once", ALL,
            [H(REF), MODEL(), K("kv_transfer_params", KTP), H('{"x":1}'), K("routed_dp_rank", "3"), MSGS()],
            outcome="stripped")
    ro_case("with-null-hint", "a null hint and a router-only member", ALL,
            [MODEL(), K("routed_dp_rank", "3"), H("null")], outcome="null_hint")
    ro_case("messages-same-name", "a member of the same name inside messages stays", ALL,
            [MODEL(), K("messages", '[{"role":"user","content":"hi","kv_transfer_params":{"remote_host":"h"},"bootstrap_room":1}]')],
            outcome="no_hint")
    ro_case("nested-name-at-top", "backend_instance_id at the top level is not nvext.backend_instance_id: it stays", ALL,
            [MODEL(), K("backend_instance_id", "3"), K("dp_rank", "1"), MSGS()], outcome="no_hint")
    ro_case("nvext-not-object", "nvext that is not an object is left as it is", ALL,
            [MODEL(), K("nvext", '[{"backend_instance_id":1}]'), MSGS()], outcome="no_hint")
    ro_case("nvext-kept-members", "nvext's other members stay, in order, with their own spacing", ALL,
            [MODEL(), K("nvext", NB(K("backend_instance_id", "1"), K("ignore_eos", "true", sep=" , "),
                                    K("dp_rank", "0", sep=","), K("annotations", '["a"]', sep=",  "),
                                    K("token_data", "[1,2,3]", sep=","), head="{ ", tail=" }")), MSGS()])
    ro_case("nvext-only-fields", "nvext holding only router-only members becomes an empty object", ALL,
            [MODEL(), K("nvext", NB(K("decode_worker_id", "1"), K("prefill_worker_id", "2"))), MSGS()])
    ro_case("nvext-duplicates", "each of duplicate nvext objects loses its router-only members", ALL,
            [K("nvext", NB(K("dp_rank", "1"), K("dp_rank", "2"), K("k", "0"))), MODEL(), K("nvext", NB(K("use_raw_prompt", "true")))])
    ro_case("nvext-deeper-same-name", "a deeper member of the same name stays", ALL,
            [MODEL(), K("nvext", NB(K("extra", '{"dp_rank":1}'), K("dp_rank", "1")))])
    ro_case("trusted-kept", "a trusted sender's router-only members and headers arrive unchanged", ALL,
            [MODEL(), K("kv_transfer_params", KTP), K("nvext", NB(K("backend_instance_id", "1"))), MSGS()], trusted=True,
            headers={"x-prefiller-host-port": "10.0.0.9:8000", "x-dynamo-dp-rank": "1"})
    ro_case("header-and-body", "router-only headers and members together", ALL,
            [MODEL(), K("kv_transfer_params", KTP), MSGS()], headers={"x-data-parallel-rank": "1", "x-prefiller-url": "http://h:1"})
    ro_case("other-header-kept", "a header that is not router-only goes on", ALL,
            [MODEL(), MSGS()], headers={"x-session-id": "s1", "x-prefiller": "not-a-field"})
    # The operator's own fields: a deeper path, a header.
    ro_case("own-member", "an operator's own member", OWN, [MODEL(), K("my_field", '"v"'), MSGS()])
    ro_case("own-deep-path", "a path three deep removes only its leaf", OWN,
            [MODEL(), K("a", NB(K("b", NB(K("c", "1"), K("d", "2"))), K("c", "3"))), MSGS()])
    ro_case("own-level-not-removed", "a level of a path is not itself removed", OWN,
            [MODEL(), K("a", NB(K("b", "1"))), MSGS()], outcome="no_hint")
    ro_case("own-header", "an operator's own header, configured in capitals", OWN, [MODEL(), MSGS()],
            headers={"x-my-router": "r1"})
    ro_case("own-not-preset", "without engines, no preset field is touched", OWN,
            [MODEL(), K("kv_transfer_params", KTP), MSGS()], headers={"x-prefiller-host-port": "h:1"}, outcome="no_hint")
    # untrusted: refuse.
    ro_case("refuse-member", "untrusted: refuse answers 400 for a router-only member, naming it", REFUSE,
            [MODEL(), K("kv_transfer_params", KTP), MSGS()])
    ro_case("refuse-escaped", "untrusted: refuse answers 400 for an escaped spelling too", REFUSE,
            [MODEL(), M('"kv_transfer\\u005fparams"', "1"), MSGS()])
    ro_case("refuse-header", "untrusted: refuse answers 400 for a router-only header", REFUSE,
            [MODEL(), MSGS()], headers={"x-prefiller-host-port": "10.0.0.9:8000"})
    ro_case("refuse-none", "untrusted: refuse forwards a request without router-only fields", REFUSE,
            [MODEL(), K("cache_salt", '"s"'), MSGS()], headers={"x-session-id": "s1"}, outcome="no_hint")
    ro_case("refuse-trusted", "a trusted sender is never refused", REFUSE,
            [MODEL(), K("kv_transfer_params", KTP), MSGS()], trusted=True, headers={"x-prefiller-host-port": "h:1"})


def main():
    for gen in (gen_admission, gen_untrusted, gen_members, gen_version, gen_structure, gen_numbers,
                gen_strings, gen_size, gen_depth, gen_body, gen_encoding, gen_http, gen_grpc, gen_large,
                gen_senders, gen_router_only):
        gen()
    total = 0
    for old in os.listdir(HERE):
        if old.endswith(".json"):
            os.remove(os.path.join(HERE, old))
    for group in sorted(GROUPS):
        cases = GROUPS[group]
        data = {"group": group, "cases": cases}
        text = json.dumps(data, indent=1, ensure_ascii=False) + "\n"
        with open(os.path.join(HERE, group + ".json"), "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        total += len(cases)
        print("%-10s %4d cases" % (group, len(cases)))
    print("total      %4d cases" % total)


if __name__ == "__main__":
    sys.setrecursionlimit(100000)
    threading.stack_size(512 * 1024 * 1024)
    err = []

    def run():
        try:
            main()
        except BaseException as e:  # report from the worker thread
            import traceback
            traceback.print_exc()
            err.append(e)
    t = threading.Thread(target=run)
    t.start()
    t.join()
    sys.exit(1 if err else 0)
