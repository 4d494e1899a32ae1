#!/usr/bin/env python3
"""tools/jinja_diff.py DIR [TANDEM]: render every DIR/*.jinja with tandem and with jinja2 set up as
transformers' apply_chat_template sets it up, over a dozen conversations (plain, multi-turn, system
only, a final assistant turn, tools with and without calls, string and object arguments, two calls,
reasoning content, content parts, enable_thinking both ways), with and without the generation
prompt, and print every render that differs (output or error; two errors count as agreeing).

Needs only jinja2 (Debian's python3-jinja2; 3.1 is what transformers 5 uses), not transformers:
the environment below is the one transformers builds (ImmutableSandboxedEnvironment with
trim_blocks and lstrip_blocks, loopcontrols, the {% generation %} tag, its tojson, raise_exception
and strftime_now). For published templates (say, those llama.cpp keeps in models/templates): keep
them out of the repository. Session 37 ran 27 of them: docs/templates.md.

    python3 tools/jinja_diff.py /tmp/templates [build/tandem]
"""
import datetime
import glob
import json
import os
import subprocess
import sys
import tempfile

import jinja2
import jinja2.ext
from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

BOS, EOS, DATE = "<s>", "</s>", datetime.datetime(2026, 12, 3, 12, 0, 0)


class Generation(jinja2.ext.Extension):
    """transformers' AssistantTracker, rendering its body"""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


ENV = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                   extensions=[Generation, jinja2.ext.loopcontrols])
ENV.filters["tojson"] = tojson
ENV.globals["raise_exception"] = raise_exception
ENV.globals["strftime_now"] = lambda fmt: DATE.strftime(fmt)

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Get the weather for a city.",
          "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"},
                                                          "unit": {"type": "string", "enum": ["c", "f"]}},
                         "required": ["city"]}}}]


def call(i, city, args_as_string=False, **more):
    args = dict(city=city, **more)
    return {"id": "call_%d" % i, "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps(args) if args_as_string else args}}


CASES = {
    "user": ([{"role": "user", "content": "Hello! Wie geht's? 你好"}], {}),
    "multi": ([{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi"},
               {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "2+2?"}], {}),
    "sys_only": ([{"role": "system", "content": "Sys only."}], {}),
    "asst_last": ([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hel"}], {}),
    "think_off": ([{"role": "user", "content": "Hi"}], {"enable_thinking": False}),
    "think_on": ([{"role": "user", "content": "Hi"}], {"enable_thinking": True}),
    "reasoning": ([{"role": "user", "content": "Hi"},
                   {"role": "assistant", "content": "Hello.", "reasoning_content": "The user greets."},
                   {"role": "user", "content": "Bye"}], {}),
    "tools_plain": ([{"role": "user", "content": "Hi"}], {"tools": TOOLS}),
    "tools": ([{"role": "system", "content": "Use tools."}, {"role": "user", "content": "Weather in Paris?"},
               {"role": "assistant", "content": "", "tool_calls": [call(1, "Paris", unit="c")]},
               {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "{\"temp\": 21.5}"},
               {"role": "user", "content": "Thanks"}], {"tools": TOOLS}),
    "tools_str": ([{"role": "user", "content": "Weather in Oslo?"},
                   {"role": "assistant", "content": None, "tool_calls": [call(2, "Oslo", True)]},
                   {"role": "tool", "tool_call_id": "call_2", "content": "cold"}], {"tools": TOOLS}),
    "two_calls": ([{"role": "user", "content": "Paris and Rome?"},
                   {"role": "assistant", "content": "Checking.", "tool_calls": [call(3, "Paris"), call(4, "Rome", unit="f")]},
                   {"role": "tool", "tool_call_id": "call_3", "name": "get_weather", "content": "sunny"},
                   {"role": "tool", "tool_call_id": "call_4", "name": "get_weather", "content": "rain"},
                   {"role": "assistant", "content": "Paris sunny, Rome rain."}, {"role": "user", "content": "ok"}],
                  {"tools": TOOLS}),
    "parts": ([{"role": "user", "content": [{"type": "text", "text": "Describe"}, {"type": "text", "text": " this."}]}],
              {}),
}


def reference(src, msgs, agp, kw):
    try:
        t = ENV.from_string(src)
        v = dict(messages=msgs, tools=None, documents=None, add_generation_prompt=agp, bos_token=BOS, eos_token=EOS)
        v.update(kw)
        return ("ok", t.render(**v))
    except Exception as e:  # a TemplateError, or what Python raised (both: an error for this comparison)
        return ("error", "%s: %s" % (type(e).__name__, e))


def tandem(binary, path, msgs, agp, kw, scratch):
    with open(scratch, "w", encoding="utf-8") as f:
        json.dump(msgs, f, ensure_ascii=False)
    cmd = [binary, "template", "--template", path, "--messages", scratch, "--bos", BOS, "--eos", EOS,
           "--date", DATE.strftime("%Y-%m-%d")] + (["--add-generation-prompt"] if agp else [])
    if kw:
        cmd += ["--kwargs", json.dumps(kw)]
    p = subprocess.run(cmd, capture_output=True, timeout=60)
    if p.returncode == 0:
        return ("ok", p.stdout.decode("utf-8", "replace"))
    return ("error", p.stderr.decode("utf-8", "replace").strip())


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    binary = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "..", "build", "tandem")
    n = bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        scratch = os.path.join(tmp, "messages.json")
        for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.jinja"))):
            with open(path, encoding="utf-8", newline="") as f:
                src = f.read()
            for name, (msgs, kw) in CASES.items():
                for agp in (True, False):
                    n += 1
                    a, b = reference(src, msgs, agp, kw), tandem(binary, path, msgs, agp, kw, scratch)
                    if a == b or a[0] == b[0] == "error":
                        continue
                    bad += 1
                    print("DIFF %s %s add_generation_prompt=%s" % (os.path.basename(path), name, agp))
                    if a[0] != b[0]:
                        print("  jinja2: %s %.300r\n  tandem: %s %.300r" % (a[0], a[1], b[0], b[1]))
                    else:
                        i = 0
                        while i < min(len(a[1]), len(b[1])) and a[1][i] == b[1][i]:
                            i += 1
                        print("  from char %d: jinja2 %r\n  %16s tandem %r" % (i, a[1][i:i + 80], "", b[1][i:i + 80]))
    print("%d renders, %d differ" % (n, bad))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
