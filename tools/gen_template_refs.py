#!/usr/bin/env python3
"""tools/gen_template_refs.py DIR: expected renders for the chat-template fixtures in DIR
(tests/data/templates/*.jinja), made by transformers' own chat-template renderer, in the format of
../shared/conformance/chat_templates (one NAME.json beside each NAME.jinja).

The templates are written to exercise the Jinja features real chat templates use (namespaces,
loop variables, filters and tests, macros, tool calls, set blocks, whitespace control,
raise_exception, strftime_now, template kwargs); transformers renders them, tandem must agree byte
for byte (tests/test_template.c). Needs transformers 5 (the lent H200 machine has 5.17). The date
strftime_now sees is pinned to PINNED.
"""
import datetime as _dt
import hashlib
import json
import os
import sys

import jinja2
import transformers
from transformers.utils import chat_template_utils as ctu

PINNED = "2025-07-26"


class _PinnedDatetime(_dt.datetime):
    @classmethod
    def now(cls, tz=None):
        return cls(2025, 7, 26, 9, 30, 0)


ctu.datetime = _PinnedDatetime  # strftime_now reads datetime.now()

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                         "required": ["city"]}}},
         {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}}}}]

CASES = [
    ("basic", [{"role": "system", "content": "  Be brief.\n"}, {"role": "user", "content": "Hello there, how are you?"},
               {"role": "assistant", "content": "Fine."}, {"role": "user", "content": "What is 2+2?"}], True, {}, None),
    ("user_only_no_prompt", [{"role": "user", "content": "Hi"}], False, {}, None),
    ("unicode", [{"role": "user", "content": "Héllo wörld 你好 😀\nnew \"line\" \\ tab\t."},
                 {"role": "assistant", "content": "Ça va ? ☃"}], True, {}, None),
    ("tools", [{"role": "user", "content": "Weather in Paris?"},
               {"role": "assistant", "content": "",
                "tool_calls": [{"type": "function", "function": {"name": "get_weather",
                                                                  "arguments": {"city": "Paris", "days": 2}}},
                               {"type": "function", "function": {"name": "now", "arguments": {}}}]},
               {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21.5}"},
               {"role": "user", "content": [{"type": "text", "text": "And this "}, {"type": "image"},
                                            {"type": "text", "text": "picture?"}]}], True, {}, TOOLS),
    ("tools_text", [{"role": "system", "content": "You help."}, {"role": "user", "content": "Weather in Paris, and the time?"},
                    {"role": "assistant", "content": "Checking.",
                     "tool_calls": [{"type": "function", "id": "call_1",
                                     "function": {"name": "get_weather", "arguments": {"city": "Paris <FR>", "days": 2}}},
                                    {"type": "function", "id": "call_2", "function": {"name": "now", "arguments": {}}}]},
                    {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21.5}"},
                    {"role": "tool", "tool_call_id": "call_2", "content": "09:30"},
                    {"role": "user", "content": "Thanks!"}], True, {}, TOOLS),
    ("starts_with_assistant", [{"role": "assistant", "content": "Hello"}, {"role": "user", "content": "Hi"}],
     True, {}, None),
    ("not_alternating", [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}], False, {}, None),
    ("kwargs", [{"role": "user", "content": "Think?"}], True, {"enable_thinking": False, "custom": "x1"}, None),
]


def render(src, messages, agp, kwargs, tools, bos, eos):
    """as transformers' render_jinja_template: its compiled template (sandbox, trim_blocks, lstrip_blocks,
    loopcontrols, tojson, raise_exception, strftime_now), rendered with the same variables"""
    template = ctu._compile_jinja_template(src)
    return template.render(messages=messages, tools=tools, documents=None, add_generation_prompt=agp,
                           bos_token=bos, eos_token=eos, **kwargs)


def main():
    d = sys.argv[1]
    bos, eos = "<s>", "</s>"
    for fn in sorted(os.listdir(d)):
        if not fn.endswith(".jinja"):
            continue
        src = open(os.path.join(d, fn), encoding="utf-8").read()
        cases = []
        for name, msgs, agp, kw, tools in CASES:
            c = {"name": name, "messages": msgs, "add_generation_prompt": agp,
                 "template_kwargs": dict(kw, **({"tools": tools} if tools else {})),
                 "expected_text": None, "expected_error": None}
            try:
                c["expected_text"] = render(src, msgs, agp, kw, tools, bos, eos)
            except jinja2.exceptions.TemplateError as e:
                c["expected_error"] = f"TemplateError: {e}"
            except Exception as e:  # noqa: BLE001 - recorded for the fixture's author to look at
                c["unexpected_error"] = f"{type(e).__name__}: {e}"
            cases.append(c)
        out = {"template_file": fn, "bos_token": bos, "eos_token": eos, "strftime_now_pinned_date": PINNED,
               "versions": {"transformers": transformers.__version__, "jinja2": jinja2.__version__},
               "template_sha256": hashlib.sha256(src.encode()).hexdigest(),
               "special_tokens_in_context": {"bos_token": bos, "eos_token": eos}, "cases": cases}
        with open(os.path.join(d, fn[:-6] + ".json"), "w", encoding="utf-8") as f:
            json.dump(out, f, ensure_ascii=False, indent=1)
        print(fn, [(c["name"], "ok" if c["expected_text"] is not None else c.get("expected_error") or
                    c.get("unexpected_error")) for c in cases])


if __name__ == "__main__":
    main()
