#!/usr/bin/env python3
"""Writes chat_goldens.jsonl: prompts rendered by the reference, Hugging Face
transformers' chat-template renderer (jinja2 in transformers' sandboxed
environment), for the templates in templates/ and for small Jinja snippets.

The C++ tests (ChatTemplateTest.cpp) render the same inputs with ninfer's
interpreter and require byte-identical text, or an error where the reference
raised one. Run from anywhere:

    python3 tests/chat/make_goldens.py

Needs transformers (>= 4.45) and jinja2 (>= 3.1.6). One JSON object per line:
  {"kind": "chat", "name", "template", "messages", "add_generation_prompt",
   "bos_token", "eos_token", "extra", "expected" | "error"}
  {"kind": "snippet", "name", "source", "vars", "expected" | "error"}
Snippets are rendered with the variables ninfer passes: messages ([] unless
given), tools=None, documents=None, add_generation_prompt, plus `vars`.
"""

import json
import os
import sys

import jinja2
import transformers
from transformers.utils.chat_template_utils import (
    _compile_jinja_template,
    render_jinja_template,
)

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "chat_goldens.jsonl")

# The special tokens each family's tokenizer_config.json declares (None: the
# tokenizer has no such token, so the variable is undefined).
FAMILIES = {
    "qwen2_5": (None, "<|im_end|>"),
    "qwen3": (None, "<|im_end|>"),
    "llama3": ("<|begin_of_text|>", "<|eot_id|>"),
    "llama3_1": ("<|begin_of_text|>", "<|eot_id|>"),
    "llama2": ("<s>", "</s>"),
    "mistral": ("<s>", "</s>"),
    "gemma": ("<bos>", "<eos>"),
    "gemma3": ("<bos>", "<eos>"),
    "phi3": ("<s>", "<|endoftext|>"),
    "deepseek_r1": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "mistral_v3_tools": ("<s>", "</s>"),
    "hermes_tools": ("<|begin_of_text|>", "<|im_end|>"),
}

TRICKY = ("Grüße, 世界! 🙂 \"double\" and 'single' quotes, a back\\slash,\n"
          "a tab\there, {{ not a tag }} {% neither %} <|im_end|>-looking text\n\n  ")

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city — in °C",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Zürich"},
                "days": {"type": "integer", "minimum": 1},
            },
            "required": ["city"],
        },
    },
}

TOOL_CALL = {
    "role": "assistant",
    "tool_calls": [{
        "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "Zürich", "days": 2}},
    }],
}

CONVERSATIONS = {
    "single_user": [{"role": "user", "content": "Hello!"}],
    "system_user": [
        {"role": "system", "content": "You are a terse assistant."},
        {"role": "user", "content": "What is 2+2?"},
    ],
    "multi_turn": [
        {"role": "system", "content": "  Be helpful.\n"},
        {"role": "user", "content": "Hi there"},
        {"role": "assistant", "content": " Hello! How can I help? "},
        {"role": "user", "content": "Tell me a joke."},
    ],
    "history_ends_with_assistant": [
        {"role": "user", "content": "Name a color."},
        {"role": "assistant", "content": "Blue."},
    ],
    "no_system_multi_turn": [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "two"},
        {"role": "user", "content": "three"},
    ],
    "unicode_quotes_newlines": [
        {"role": "system", "content": TRICKY},
        {"role": "user", "content": TRICKY},
        {"role": "assistant", "content": "Ünïcödé ✓\r\nline two"},
        {"role": "user", "content": "\n\n  padded  \n"},
    ],
    "empty_content": [{"role": "user", "content": ""}],
    "bad_order_assistant_first": [
        {"role": "assistant", "content": "I speak first."},
        {"role": "user", "content": "ok"},
    ],
    "bad_order_two_users": [
        {"role": "user", "content": "a"},
        {"role": "user", "content": "b"},
    ],
}

TOOL_CONVERSATION = [
    {"role": "system", "content": "You can check the weather."},
    {"role": "user", "content": "Weather in Zürich for two days?"},
    TOOL_CALL,
    {"role": "tool", "content": "{\"temp_c\": 21.5, \"sky\": \"clear\"}"},
    {"role": "tool", "content": "second result"},
]

# Mistral v0.3 needs 9-character call ids; DeepSeek concatenates arguments as text.
TOOL_CONVERSATION_IDS = [
    {"role": "user", "content": "Weather in Zürich?"},
    {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "id": "call12345", "function": {
        "name": "get_weather", "arguments": "{\"city\": \"Zürich\"}"}}]},
    {"role": "tool", "tool_call_id": "call12345", "content": "{\"temp_c\": 21.5}"},
    {"role": "assistant", "content": "<think>warm</think>It is 21.5 °C."},
    {"role": "user", "content": "Thanks"},
]

QWEN3_THINKING = [
    {"role": "user", "content": "What is 6*7?"},
    {"role": "assistant", "content": "<think>\nSix sevens.\n</think>\n\n42"},
    {"role": "user", "content": "And 6*8?"},
]


def chat_cases():
    cases = []

    def add(name, template, messages, gen, extra=None, tools=None):
        bos, eos = FAMILIES[template]
        cases.append({
            "name": name, "template": template, "messages": messages,
            "add_generation_prompt": gen, "bos_token": bos, "eos_token": eos,
            "extra": dict(extra or {}, **({"tools": tools} if tools is not None else {})),
        })

    for template in FAMILIES:
        for conv_name, messages in CONVERSATIONS.items():
            for gen in (True, False):
                add(f"{template}/{conv_name}/gen={int(gen)}", template, messages, gen)
    for template in ("qwen2_5", "qwen3"):
        add(f"{template}/tools", template, TOOL_CONVERSATION, True, tools=[WEATHER_TOOL])
        add(f"{template}/tool_calls_without_tools", template, TOOL_CONVERSATION, False)
    add("qwen3/thinking_history", "qwen3", QWEN3_THINKING, True)
    add("qwen3/enable_thinking_false", "qwen3", QWEN3_THINKING, True,
        extra={"enable_thinking": False})
    add("qwen3/reasoning_content", "qwen3", [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello", "reasoning_content": "\nGreet back.\n"},
    ], False)
    for template in ("mistral_v3_tools", "deepseek_r1", "hermes_tools"):
        add(f"{template}/tools", template, TOOL_CONVERSATION_IDS, True, tools=[WEATHER_TOOL])
        add(f"{template}/tool_history", template, TOOL_CONVERSATION_IDS, False)
    add("mistral_v3_tools/bad_call_id", "mistral_v3_tools", [
        {"role": "user", "content": "x"},
        {"role": "assistant", "tool_calls": [{"type": "function", "id": "short", "function": {
            "name": "f", "arguments": "{}"}}]}], False)
    add("llama3_1/date_string", "llama3_1", CONVERSATIONS["system_user"], True,
        extra={"date_string": "01 Jan 2025"})
    add("llama3_1/tools_in_user_message", "llama3_1", TOOL_CONVERSATION, True,
        tools=[WEATHER_TOOL])
    add("llama3_1/tools_in_system", "llama3_1", TOOL_CONVERSATION, True,
        extra={"tools_in_user_message": False}, tools=[WEATHER_TOOL])
    add("llama3_1/builtin_tools", "llama3_1", CONVERSATIONS["multi_turn"], True,
        extra={"builtin_tools": ["brave_search", "code_interpreter", "wolfram_alpha"]})
    add("llama3_1/builtin_tool_call", "llama3_1", [
        {"role": "user", "content": "Search for ninfer"},
        {"role": "assistant", "tool_calls": [{"type": "function", "function": {
            "name": "brave_search", "arguments": {"query": "ninfer \"compiler\""}}}]},
        {"role": "ipython", "content": "no results"},
    ], True, extra={"builtin_tools": ["brave_search"]})
    add("llama3_1/two_tool_calls_error", "llama3_1", [
        {"role": "user", "content": "x"},
        {"role": "assistant", "tool_calls": [TOOL_CALL["tool_calls"][0]] * 2},
    ], True)
    add("llama3_1/tools_without_user_error", "llama3_1",
        [{"role": "system", "content": "only system"}], True, tools=[WEATHER_TOOL])
    add("mistral/tool_role_error", "mistral", [
        {"role": "user", "content": "x"}, {"role": "tool", "content": "y"}], True)
    add("gemma3/structured_content", "gemma3", [
        {"role": "system", "content": [{"type": "text", "text": "Sys prompt "}]},
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": " Describe. "}]},
    ], True)
    return cases


def render_chat(case):
    path = os.path.join(HERE, "templates", case["template"] + ".jinja")
    with open(path, encoding="utf-8") as f:
        template = f.read()
    kwargs = dict(case["extra"])
    tools = kwargs.pop("tools", None)
    for key in ("bos_token", "eos_token"):
        if case[key] is not None:
            kwargs[key] = case[key]
    rendered, _ = render_jinja_template(
        conversations=[case["messages"]], tools=tools, chat_template=template,
        add_generation_prompt=case["add_generation_prompt"], **kwargs)
    return rendered[0]


# Small templates that pin down one behaviour each (whitespace control, scoping,
# Python semantics of operators, filters and methods).
SNIPPETS = [
    # whitespace control: trim_blocks, lstrip_blocks, -, +
    ("ws/trim_lstrip", "  {% if true %}\n  a\n  {% endif %}\n  b\n", {}),
    ("ws/minus", "a  \n {%- if true -%} \n b \n {%- endif -%}  \n c", {}),
    ("ws/plus", "a\n  {%+ if true +%}\nb\n{% endif %}", {}),
    ("ws/variable_not_lstripped", "x\n   {{ 'y' }}\n   {% if true %}z{% endif %}", {}),
    ("ws/text_before_tag_not_stripped", "x  {% if true %}y{% endif %}", {}),
    ("ws/after_variable", "{{ 'a' }}  {% if true %}y{% endif %}\n  {% if true %}z{% endif %}", {}),
    ("ws/comment", "a\n  {# comment #}\nb {#- tight -#} c\n{#+ keep +#}\nd", {}),
    ("ws/variable_minus", "a \n {{- 'b' -}} \n c", {}),
    ("ws/crlf", "a\r\n{% if true %}\r\nb\r\n{% endif %}\r\nc\r\n", {}),
    ("ws/trailing_newline_dropped", "x\n", {}),
    ("ws/two_trailing_newlines", "x\n\n", {}),
    ("ws/raw", "{% raw %}{{ not rendered }}{% endraw %}|{%- raw -%}  x  {%- endraw %}", {}),
    ("ws/unicode_space_minus", "a\u00a0\u3000{%- if true %}b{% endif %}", {}),
    # literals and output
    ("lit/values", "{{ none }}|{{ true }}|{{ 1.0 }}|{{ [1,'a',none] }}|{{ {'a':1} }}|{{ 1e20 }}|"
     "{{ 0.1+0.2 }}|{{ 1e-5 }}|{{ 123456789012345678 }}|{{ (1,2) }}|{{ ('a',) }}|{{ -0.0 }}", {}),
    ("lit/strings", "{{ 'a\\u00e9\\n\\x41\\q\\101\\t' }}{{ \"it's\" }}{{ 'x' 'y' \"z\" }}", {}),
    ("lit/repr_quotes", "{{ [\"it's\", 'say \"hi\"', 'both \\' \"', 'nl\\n'] }}", {}),
    ("lit/numbers", "{{ 0x1F }} {{ 0o17 }} {{ 0b101 }} {{ 1_000 }} {{ 2.5e3 }} {{ 1.5E-3 }} {{ 100.0 }}", {}),
    ("lit/floats", "{{ 1/3 }} {{ 2/3*3 }} {{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 123.456 }} "
     "{{ 5e-324 }} {{ 1.7976931348623157e308 }}", {}),
    ("lit/true_case", "{{ True }}{{ False }}{{ None }}{{ true is true }}", {}),
    # arithmetic and operators
    ("op/arith", "{{ 7 // -2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 5 - 2 - 1 }} "
     "{{ 2 * 3 % 4 }} {{ 4 / 2 }} {{ -3 // 2 }} {{ 7.5 // 2 }} {{ 7.5 % 2 }} {{ -7.5 % 2 }} "
     "{{ 2 ** 3 ** 2 }} {{ true + 1 }} {{ -2|abs }} {{ 3 - -2 }}", {}),
    ("op/concat", "{{ 'a' ~ 1 ~ none ~ true ~ [1] }}{{ (1 + 2) ~ '' }}", {}),
    ("op/repeat", "{{ 'ab' * 3 }} {{ [1] * 2 }} {{ 2 * 'x' }} {{ 'x' * 0 }}", {}),
    ("op/compare", "{{ 0 == false }} {{ 1 == true }} {{ 1 == 1.0 }} {{ 'a' == 'a' }} {{ [1, 2] == [1, 2] }} "
     "{{ (1,2) == [1,2] }} {{ {'a':1} == {'a':1} }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 'ab' < 'b' }} "
     "{{ [1,2] < [1,3] }} {{ none == none }} {{ 'é' > 'z' }}", {}),
    ("op/in", "{{ 'a' in 'abc' }} {{ 1 in [1] }} {{ 'a' in {'a':1} }} {{ 'x' not in 'abc' }} "
     "{{ 2 in (1, 2) }} {{ 1 in undefined_thing }}", {}),
    ("op/logic", "{{ 1 and 'x' }} {{ 0 and 'x' }} {{ '' or 'y' }} {{ 'z' or 'y' }} {{ not 1 == 2 }} "
     "{{ not [] }} {{ none or [] }}", {}),
    ("op/condexpr", "{{ 'a' if true else 'b' }}{{ 'a' if false else 'b' }}{{ 'x' if false }}|"
     "{{ 1 if false else 2 if false else 3 }}", {}),
    # undefined
    ("undef/print", "[{{ y }}][{{ y | length }}][{{ 'a' ~ y }}][{{ y|trim }}][{{ y|default('d') }}]"
     "{% for a in y %}x{% else %}empty{% endfor %}[{{ y is none }}{{ y == none }}{{ y is defined }}]"
     "[{{ x.missing }}][{{ x['missing'] }}][{{ x.missing is defined }}][{{ none.z }}]", {"x": {}}),
    ("undef/attr_of_undefined", "{{ y.z }}", {}),
    ("undef/item_of_undefined", "{{ y[0] }}", {}),
    ("undef/add", "{{ 'a' + y }}", {}),
    ("undef/nested_attr", "{{ x.a.b }}", {"x": {}}),
    ("undef/index_out_of_range", "[{{ [1,2,3][5] }}][{{ [1,2,3][-1] }}][{{ 'abc'[1] }}][{{ 'héllo'[1] }}]", {}),
    # scoping
    ("scope/loop_set_does_not_leak", "{% for i in [1,2,3] %}[{{ x }}]{% set x = i %}{% endfor %}{{ x }}", {}),
    ("scope/loop_reads_outer", "{% set x = 5 %}{% for i in [1,2,3] %}[{{ x }}]{% set x = i %}{% endfor %}{{ x }}", {}),
    ("scope/if_does_leak", "{% if true %}{% set x = 2 %}{% endif %}{{ x }}", {}),
    ("scope/namespace", "{% set ns = namespace(a=1, b='s') %}{% for i in [1,2] %}{% set ns.a = ns.a + i %}"
     "{% endfor %}{{ ns.a }}{{ ns.b }}{{ ns.missing is defined }}", {}),
    ("scope/namespace_from_dict", "{% set ns = namespace({'k': 3}) %}{{ ns.k }}", {}),
    ("scope/nested_loops", "{% for a in [1,2] %}{% for b in 'xy' %}{{ loop.index }}{{ a }}{{ b }}"
     "{% endfor %}{{ loop.index }};{% endfor %}", {}),
    ("scope/macro", "{% set x = 1 %}{% macro m(a, b=2) %}{{ a }}-{{ b }}-{{ x }}{% endmacro %}"
     "{% set x = 2 %}{{ m(1) }}|{{ m(1, b=3) }}|{{ m(5, 6) }}|{{ m() }}", {}),
    ("scope/macro_in_loop", "{% for x in [1, 2] %}{% macro m() %}<{{ x }}>{% endmacro %}{{ m() }}{% endfor %}", {}),
    ("scope/set_tuple", "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c, d = 'xy' %}{{ d }}{{ c }}", {}),
    ("scope/set_block", "{% set x %}a{{ 1 }}b{% endset %}[{{ x }}]{% set y | upper %}q{% endset %}{{ y }}", {}),
    ("scope/with", "{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]", {}),
    ("scope/messages_override", "{% set messages = messages[1:] %}{{ messages|length }}{{ messages[0].content }}",
     {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]}),
    # loops
    ("loop/vars", "{% for i in [1,2,3,4] if i is even %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.length }}"
     "{{ loop.first }}{{ loop.last }}{{ loop.revindex }}{{ loop.revindex0 }},{% endfor %}", {}),
    ("loop/prev_next_cycle", "{% for x in 'abc' %}{{ loop.previtem }}{{ loop.nextitem }}{{ loop.cycle('o','e') }};{% endfor %}", {}),
    ("loop/unpack", "{% for a, b in [[1,2],[3,4]] %}{{ a }}{{ b }}{% endfor %}{% for k, v in {'x': 1, 'y': 2}.items() %}{{ k }}={{ v }};{% endfor %}", {}),
    ("loop/dict_and_string", "{% for x in {'a':1,'b':2} %}{{ x }}{% endfor %}{% for c in 'hé' %}[{{ c }}]{% endfor %}", {}),
    ("loop/break_continue", "{% for i in range(10) %}{% if i == 5 %}{% break %}{% endif %}{% if i is odd %}{% continue %}{% endif %}{{ i }}{% endfor %}", {}),
    ("loop/else_when_filtered_empty", "{% for i in [1, 3] if i is even %}{{ i }}{% else %}none{% endfor %}", {}),
    ("loop/reverse_slice", "{% for m in messages[::-1] %}{{ m.role }}{{ loop.index0 }}{% endfor %}",
     {"messages": [{"role": "a"}, {"role": "b"}, {"role": "c"}]}),
    ("loop/generation_tag", "{% for m in messages %}{% generation %}{{ m.content }}{% endgeneration %}{% endfor %}",
     {"messages": [{"role": "assistant", "content": "x"}, {"role": "assistant", "content": "y"}]}),
    # slices
    ("slice/all", "{{ 'abcdef'[::-1] }} {{ [1,2,3][1:] }} {{ 'abcdef'[1:4] }} {{ 'abcdef'[-2:] }} "
     "{{ 'abcdef'[::2] }} {{ [1,2,3,4,5][4:1:-2] }} {{ 'héllo'[1:3] }} {{ [1,2][5:] }} {{ (1,2,3)[:2] }} "
     "{{ 'abc'[-10:10] }} {{ 'abc'[:-1] }}", {}),
    # filters
    ("filter/strings", "{{ '  x y  '|trim }}|{{ 'xxhixx'|trim('x') }}|{{ 'Hello'|upper }}|{{ 'Hello'|lower }}|"
     "{{ 'hELLO wORLD'|capitalize }}|{{ 'hello-world foo(bar) [x]y'|title }}|{{ 3|string }}|{{ none|string }}|"
     "{{ 'a<b>&\"c\\''|e }}|{{ 'x'|safe }}|{{ 'abcabc'|replace('b', 'X') }}|{{ 'abcabc'|replace('b', 'X', 1) }}|"
     "{{ 'ab'|replace('', '-') }}", {}),
    ("filter/case_unicode", "{{ x|upper }}|{{ x|lower }}|{{ x.upper() }}|{{ x.lower() }}|{{ x|title }}|"
     "{{ x.title() }}|{{ x|capitalize }}|{{ 'ΟΔΟΣ ΣΑΣ'|lower }}|{{ 'İı'|lower }}{{ 'İı'|upper }}",
     {"x": "ĄčĘłŃ straße ÿµſ ĸŉ Ωσς άέήίόύώ Жёђ ÀÉÎÕÜ 中文🙂 x"}),
    ("filter/length", "{{ 'héllo'|length }} {{ [1,2]|count }} {{ {'a':1}|length }} {{ ''|length }}", {}),
    ("filter/default", "{{ x | default('d') }} {{ '' | default('d') }} {{ '' | default('d', true) }} "
     "{{ none|default('d') }} {{ false|d('f', boolean=true) }} {{ x|default }}|", {}),
    ("filter/join", "{{ [1,'a',none]|join(', ') }} {{ 'abc'|join('-') }} {{ [{'n': 'a'}, {'n': 'b'}]|join('+', attribute='n') }} {{ [1,2]|join }}", {}),
    ("filter/first_last", "{{ 'abc'|first }} {{ [1,2]|last }} {{ []|first }}|{{ 'xyz'|last }} {{ {'k': 1, 'j': 2}|first }}", {}),
    ("filter/list_items", "{{ 'abc'|list }} {{ {'a':1}|list }} {{ {'a':1,'b':[2]}|items|list }} {{ undefined_x|items|list }}", {}),
    ("filter/sort_unique_reverse", "{{ [3,1,2]|sort }} {{ ['b','A','a']|unique|list }} {{ [1,2,3]|reverse|list }} "
     "{{ 'abc'|reverse }} {{ ['b','A','c']|sort }} {{ ['b','A','c']|sort(case_sensitive=true) }} "
     "{{ [3,1,2]|sort(reverse=true) }} {{ [{'a': 2}, {'a': 1}]|sort(attribute='a') }} {{ ['a','A','b']|unique(case_sensitive=true)|list }}", {}),
    ("filter/select", "{{ [{'a':1},{'a':0},{'b':1}]|selectattr('a')|list }} {{ [{'a':1},{'a':0}]|rejectattr('a')|list }} "
     "{{ [{'r':'u'},{'r':'s'}]|selectattr('r', 'equalto', 'u')|list }} {{ [1,2,3,4]|select('odd')|list }} "
     "{{ [1,2,3,4]|reject('odd')|list }} {{ [0,1,'',2]|select|list }} {{ ['a','b','code']|reject('equalto', 'code')|list }} "
     "{{ [{'x': {'y': 1}}, {'x': {'y': 0}}]|selectattr('x.y')|list|length }} {{ [1,5,3]|select('>', 2)|list }} "
     "{{ [1,2,3]|select('in', [2, 3])|list }}", {}),
    ("filter/map", "{{ [{'a':1},{'a':0}]|map(attribute='a')|list }} {{ ['a','b']|map('upper')|list }} "
     "{{ [{'a':1},{}]|map(attribute='a', default=9)|list }} {{ ['x ', ' y']|map('trim')|join(',') }} "
     "{{ [' a ']|map('replace', ' ', '_')|list }}", {}),
    ("filter/numbers", "{{ 3.7|int }} {{ '42'|int }} {{ 'x'|int }} {{ '3.5'|float }} {{ 2.5|round }} {{ 3|round }} "
     "{{ -2.5|round }} {{ 2.675|round(2) }} {{ 3.14159|round(3, 'floor') }} {{ 1.21|round(1, 'ceil') }} "
     "{{ ' 7 '|int }} {{ '0x1A'|int(0, 16) }} {{ 'nope'|float(1.5) }} {{ true|int }} {{ [1,2,3]|sum }} "
     "{{ [1.5, 2]|sum }} {{ [{'v': 1}, {'v': 2}]|sum(attribute='v') }} {{ [3,1,2]|max }} {{ [3,1,2]|min }} "
     "{{ ['b','A']|max }} {{ -3|abs }} {{ -1.5|abs }} {{ 3|float }}", {}),
    ("filter/indent", "{{ '  a\n\n  b'|indent(2) }}|{{ 'x\ny'|indent(2, true) }}|{{ 'x\n\ny'|indent(blank=true) }}|"
     "{{ 'x\ny'|indent('> ') }}", {}),
    ("filter/dictsort", "{{ {'b': 1, 'A': 2, 'c': 0}|dictsort }} {{ {'b': 1, 'a': 2}|dictsort(by='value') }} "
     "{{ {'b': 1, 'a': 2}|dictsort(reverse=true) }}", {}),
    ("filter/tojson", "{{ 'é\\n\"<'|tojson }} {{ {'b':1,'a':[1,2]}|tojson(indent=2) }} {{ [1,2]|tojson(separators=(',',':')) }} "
     "{{ {'a':1, 'c': {'z': 1, 'y': 2}}|tojson(sort_keys=true) }} {{ x|tojson }} {{ x|tojson(ensure_ascii=true) }} "
     "{{ []|tojson(indent=2) }} {{ {}|tojson(indent=2) }} {{ [[]]|tojson(indent='\t') }} {{ 3.0|tojson }} "
     "{{ (1, 'a')|tojson }} {{ none|tojson }} {{ 12345678901|tojson }} {{ 1e100|tojson }}",
     {"x": {"k": 1.5, "n": None, "t": True, "u": "\u2028\x01\x7f\x1f é 🙂", "l": [1, -2, 0.5]}}),
    # tests
    ("test/types", "{{ x is string }} {{ x is iterable }} {{ x is sequence }} {{ x is mapping }} {{ 1 is number }} "
     "{{ true is number }} {{ true is integer }} {{ 1 is integer }} {{ 1.0 is float }} {{ none is none }} "
     "{{ {} is mapping }} {{ [] is sequence }} {{ {} is iterable }} {{ 1 is iterable }} {{ true is boolean }} "
     "{{ 1 is boolean }} {{ false is false }} {{ 0 is false }} {{ true is true }} {{ y is undefined }} "
     "{{ raise_exception is callable }} {{ 'x' is callable }}", {"x": "s"}),
    ("test/values", "{{ 4 is even }} {{ 3 is odd }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }} "
     "{{ 'a' is in 'abc' }} {{ 2 is in [1,2] }} {{ 1 is eq 1 }} {{ 1 is ne 2 }} {{ 1 is lt 2 }} {{ 2 is le 2 }} "
     "{{ 3 is gt 2 }} {{ 3 is ge 4 }} {{ 'abc' is lower }} {{ 'ABC' is upper }} {{ 'aBc' is lower }} "
     "{{ none is sameas none }} {{ 1 is equalto 1.0 }} {{ x is not none }} {{ x is not defined }}", {"x": 1}),
    # methods
    ("method/str", "{{ 'a b  c'.split() }} {{ 'a,b,,c'.split(',') }} {{ ' x '.strip() }} {{ 'xxhixx'.strip('x') }} "
     "{{ '  x '.lstrip() }}| {{ ' x  '.rstrip() }}| {{ 'a-b-c'.split('-', 1) }} {{ 'a b c'.rsplit(None, 1) }} "
     "{{ 'a-b-c'.rsplit('-', 1) }} {{ 'abc'.startswith(('x','a')) }} {{ 'abc'.endswith('bc') }} "
     "{{ 'abc'.replace('b', 'X') }} {{ 'a\\nb\\r\\nc'.splitlines() }} {{ ', '.join(['a','b']) }} "
     "{{ 'abcb'.find('b') }} {{ 'abcb'.rfind('b') }} {{ 'abcb'.count('b') }} {{ 'hello world'.title() }} "
     "{{ \"they're\".title() }} {{ 'ABC'.lower() }} {{ 'abc'.upper() }} {{ 'hELLO'.capitalize() }} "
     "{{ '123'.isdigit() }} {{ 'ab1'.isalpha() }} {{ 'ab1'.isalnum() }} {{ ' \\t'.isspace() }} "
     "{{ 'prefix-x'.removeprefix('prefix-') }} {{ 'x.txt'.removesuffix('.txt') }} {{ 'héllo'.find('l') }} "
     "{{ '  a  b  '.split(' ') }} {{ 'a\\u00a0b'.split() }} {{ ''.split() }} {{ 'x'.split('x') }}", {}),
    ("method/dict", "{{ x.items()|list }} {{ x.keys()|list }} {{ x.values()|list }} {{ x.get('q', 'd') }} "
     "{{ x.get('a') }} {{ x.get('q') }} {{ x['a'] }} {{ x.a }}", {"x": {"a": 1, "b": [2]}}),
    ("method/list", "{{ [1,2,1].count(1) }} {{ ['a','b'].index('b') }}", {}),
    # globals
    ("global/range", "{{ range(3)|list }} {{ range(1,10,3)|list }} {{ range(5, 0, -2)|list }} {{ range(0)|list }}", {}),
    ("global/dict", "{{ dict(a=1, b='x') }} {{ dict({'c': 2}, d=3) }}", {}),
    ("global/tools_none", "{{ tools }} {{ tools is none }} {{ tools is defined }} {{ documents }} {{ add_generation_prompt }}", {}),
    ("global/raise", "{% if true %}{{ raise_exception('boom: ' ~ 42) }}{% endif %}", {}),
    # errors the reference raises too
    ("error/unknown_filter", "{{ x|bogus }}", {}),
    ("error/unknown_tag", "{% frobnicate %}", {}),
    ("error/unclosed_if", "{% if true %}x", {}),
    ("error/unclosed_string", "{{ 'abc }}", {}),
    ("error/call_undefined", "{{ foo() }}", {}),
    ("error/str_plus_int", "{{ 'a' + 1 }}", {}),
    ("error/tilde_binds_tighter_than_plus", "{{ 1 + 2 ~ '' }}", {}),
    ("error/zero_division", "{{ 1 / 0 }}", {}),
    ("error/namespace_underscore", "{% set ns = namespace(_x=1) %}", {}),
    ("error/missing_comment_end", "a {# b", {}),
    ("error/unbalanced", "{{ (1 }}", {}),
    ("error/unexpected_end_tag", "{% endfor %}", {}),
]


def render_snippet(source, variables):
    context = {"messages": [], "tools": None, "documents": None, "add_generation_prompt": True}
    context.update(variables)
    return _compile_jinja_template(source).render(**context)


def main():
    if tuple(int(p) for p in jinja2.__version__.split(".")[:2]) < (3, 1):
        sys.exit("jinja2 >= 3.1 is required")
    lines = []
    for case in chat_cases():
        try:
            case["expected"] = render_chat(case)
        except jinja2.exceptions.TemplateError as e:
            case["error"] = str(e)
        lines.append(dict(kind="chat", **case))
    for name, source, variables in SNIPPETS:
        record = {"kind": "snippet", "name": name, "source": source, "vars": variables}
        try:
            record["expected"] = render_snippet(source, variables)
        except Exception as e:  # the reference failed: ninfer must fail too
            record["error"] = f"{type(e).__name__}: {e}"
        lines.append(record)
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(json.dumps({"kind": "meta", "transformers": transformers.__version__,
                            "jinja2": jinja2.__version__, "cases": len(lines)}) + "\n")
        for record in lines:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    print(f"wrote {len(lines)} cases to {OUT}")


if __name__ == "__main__":
    main()
