"""Verify an audit JSONL export without the console: python3 verify_audit.py export.jsonl

Standard library only. Exit status 0 and "OK ..." when the file holds, 1 and "BROKEN ..." not.
"""

import hashlib
import json
import sys

V1_FIELDS = ("seq", "at", "actor", "actor_user_id", "actor_username", "action", "run_id",
             "approval_id", "tool", "data", "ip", "user_agent")  # fmt: skip


def sha256(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def v1_text(value):  # chain_version 1 (and the header, for the digest)
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def same(a, b):  # equal as JSON: numbers by value, but true is not 1 nor false 0
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


def verify(lines):
    header, *events, summary = [json.loads(line) for line in lines]
    if header.get("record") != "header" or summary.get("record") != "summary":
        return "BROKEN: no header first or no summary last (truncated?)"
    digest, prev = sha256(v1_text(header)), None
    for event in events:
        seq = event["seq"]
        if event.get("chain_version", 1) == 2:
            text = event["canonical"]  # the RFC 8785 text, hashed exactly as stored
            fields = json.loads(text, parse_int=float)  # its numbers are doubles
            if any(not same(event.get(key), value) for key, value in fields.items()):
                return f"BROKEN at seq {seq}: the line's fields differ from its canonical text"
        else:
            text = v1_text({name: event[name] for name in V1_FIELDS})
        if sha256(event["prev_hash"] + text) != event["hash"]:
            return f"BROKEN at seq {seq}: hash does not match"
        if prev and seq == prev["seq"] + 1 and event["prev_hash"] != prev["hash"]:
            return f"BROKEN at seq {seq}: prev_hash does not match seq {seq - 1}"
        if not header["filters"] and seq != (prev["seq"] + 1 if prev else 1):
            return f"BROKEN at seq {seq}: a seq is missing from an unfiltered export"
        if seq == 1 and event["prev_hash"] != "0" * 64:
            return "BROKEN at seq 1: it does not start at the genesis hash"
        if seq == header["head_seq"] and event["hash"] != header["head_hash"]:
            return f"BROKEN at seq {seq}: the head event differs from the header's head_hash"
        digest, prev = sha256(digest + event["hash"]), event
    if not header["filters"] and (prev["seq"] if prev else 0) != header["head_seq"]:
        return "BROKEN: an unfiltered export stops before the header's head_seq (truncated?)"
    if (summary["count"], summary["digest"]) != (len(events), digest):
        return "BROKEN: the summary's count or digest differs from the file"
    return f"OK: {len(events)} events, digest {digest}"


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as file:
        # Lines end at "\n" only: str.splitlines() also splits at U+2028, U+0085 ... in strings.
        outcome = verify(file.read().removesuffix("\n").split("\n"))
    print(outcome)
    sys.exit(0 if outcome.startswith("OK") else 1)
