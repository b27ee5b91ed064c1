// The Jinja interpreter behind chat templates, case by case against hand-written expectations
// (what Python's Jinja2 prints with trim_blocks, lstrip_blocks and loop controls on), and the
// ChatTemplate API: template sources, default tokens, errors that name the template line.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <filesystem>
#include <thread>
#include <fstream>

#include "chat/chat_messages.h"
#include "chat/chat_template.h"
#include "chat_template_clock.h"
#include "chat/jinja/template.h"
#include "gguf/gguf.h"
#include "tokenizer/byte_vocab.h"
#include "model/model.h"
#include "test_models.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace kvslim {
namespace {

const nlohmann::ordered_json kMessages = nlohmann::ordered_json::parse(R"([
  {"role": "system", "content": "Be brief."},
  {"role": "user", "content": "Hi \"you\" é"},
  {"role": "assistant", "content": "Hello", "tool_calls": [{"function": {"name": "f", "arguments": {"b": 1, "a": [1.5, null, true]}}}]}
])");

std::string render(const std::string& source, const nlohmann::ordered_json& messages = kMessages,
                   bool generation_prompt = true) {
  ChatTemplateOptions options;
  options.bos_token = "<s>";
  options.eos_token = "</s>";
  options.add_generation_prompt = generation_prompt;
  options.clock = testing::corpus_clock;
  return ChatTemplate::parse(source, "test.jinja").render(messages, options);
}

// The one-line error a template gives, or "" when it renders.
std::string error_of(const std::string& source) {
  try {
    render(source);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

struct Case {
  const char* source;
  const char* expected;
};

void expect_all(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    try {
      EXPECT_EQ(render(c.source), c.expected) << c.source;
    } catch (const Error& e) {
      ADD_FAILURE() << c.source << " threw: " << e.what();
    }
  }
}

TEST(ChatTemplate, WhitespaceControl) {
  expect_all({
      // trim_blocks: the newline after a block tag goes; lstrip_blocks: so does the indentation before it.
      {"{% if true %}\na\n{% endif %}\nb", "a\nb"},
      {"    {% for x in [1, 2] %}\n    {{ x }}\n    {% endfor %}\n", "    1\n    2\n"},
      // Not at the start of a line: indentation stays.
      {"x {% if true %} y {% endif %} z", "x  y  z"},
      {"{{ 'a' }}   {% if true %}b{% endif %}", "a   b"},
      // A variable tag is neither lstripped nor trimmed.
      {"  {{ 1 }}\n", "  1"},
      // '-' strips all whitespace on its side, newlines included; '+' keeps it.
      {"a  {%- if true -%}  b  {%- endif -%}  c", "abc"},
      {"a \n {{- 'b' -}} \n c", "abc"},
      {"  {%+ if true %}x{% endif %}", "  x"},
      {"{% if true +%}\nx{% endif %}", "\nx"},
      // Comments: trimmed like blocks, '-' works on them too.
      {"a\n  {# note #}\nb", "a\nb"},
      {"a {#- note -#}   b", "ab"},
      // One trailing newline of the source is dropped (keep_trailing_newline off); \r\n becomes \n.
      {"x\n", "x"},
      {"x\n\n", "x\n"},
      {"a\r\nb", "a\nb"},
      {"{% raw %}{{ kept }}{% endraw %}", "{{ kept }}"},
      // No trim_blocks after {% raw %} (Jinja2's raw rule has none), but after {% endraw %}.
      {"{% raw %}\n{{ x }}\n  {% endraw %}\nz", "\n{{ x }}\nz"},
      {"{%- raw -%}\n  {{ x }}  \n{%- endraw %}", "{{ x }}"},
  });
}

TEST(ChatTemplate, LoopsAndScopes) {
  expect_all({
      {"{% for m in messages %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}"
       "{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}",
       "1032TrueFalse3;2121FalseFalse3;3210FalseTrue3;"},
      {"{% for x in 'abc' %}{{ loop.previtem is defined and loop.previtem }}{{ x }}{% endfor %}", "Falseaabbc"},
      {"{% for x in [1, 2, 3] %}{{ loop.nextitem if loop.nextitem is defined else '.' }}{% endfor %}", "23."},
      {"{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% "
       "endfor %}",
       "0134"},
      {"{% for x in [] %}a{% else %}empty{% endfor %}", "empty"},
      // The loop filter runs before loop.length is known.
      {"{% for x in range(6) if x is odd %}{{ x }}/{{ loop.length }} {% endfor %}", "1/3 3/3 5/3 "},
      {"{% for k, v in {'a': 1, 'b': 2}|items %}{{ k }}={{ v }};{% endfor %}", "a=1;b=2;"},
      {"{% for a, b in [[1, 2], [3, 4]] %}{{ a * b }},{% endfor %}", "2,12,"},
      // A set inside a loop does not leak out; a namespace carries values across iterations.
      {"{% set x = 1 %}{% for i in range(3) %}{% set x = i %}{% endfor %}{{ x }}", "1"},
      {"{% set ns = namespace(n=0, s='') %}{% for i in range(5) %}{% set ns.n = ns.n + i %}{% set ns.s = ns.s ~ i %}"
       "{% endfor %}{{ ns.n }} {{ ns.s }}",
       "10 01234"},
      {"{% set ns = namespace() %}{% set ns.i = 0 %}{% for m in messages %}{% set ns.i = ns.i + 1 %}{% endfor %}{{ "
       "ns.i }}",
       "3"},
      // An if shares its frame with the template.
      {"{% if true %}{% set y = 'set' %}{% endif %}{{ y }}", "set"},
      {"{% for i in range(2) %}{% for j in range(2) %}{{ loop.index }}{{ i }}{% endfor %};{% endfor %}", "1020;1121;"},
      {"{% for x in range(4) %}{{ loop.cycle('a', 'b') }}{% endfor %}", "abab"},
  });
}

TEST(ChatTemplate, MacrosSetAndFilterBlocks) {
  expect_all({
      {"{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('a') }} {{ greet('b', '?') }} "
       "{{ greet(punct='.', name='c') }}",
       "Hi a! Hi b? Hi c."},
      {"{% macro m(a) %}[{{ a }}|{{ b }}]{% endmacro %}{% set b = 'B' %}{{ m(1) }}", "[1|B]"},
      {"{% macro r(n) %}{% if n > 0 %}{{ n }}{{ r(n - 1) }}{% endif %}{% endmacro %}{{ r(3) }}", "321"},
      // A macro defined in a loop sees that loop's names.
      {"{% for i in 'ab' %}{% macro m() %}{{ i }}{{ loop.index }}{% endmacro %}{{ m() }}{% endfor %}", "a1b2"},
      {"{% set body %}x{{ 1 + 1 }}{% endset %}[{{ body }}]", "[x2]"},
      {"{% set a, b = 1, 'two' %}{{ b }}{{ a }}", "two1"},
      {"{% filter upper %}hello {{ 'you' }}{% endfilter %}", "HELLO YOU"},
      // with: values from the enclosing scope, names local to the block.
      {"{% set a = 0 %}{% with a = 1, b = a %}{{ a }}{{ b }}{% set c = 3 %}{% endwith %}{{ a }}{{ c is defined }}",
       "100False"},
      // transformers' generation block (assistant masks) renders its body.
      {"{% for m in messages %}{% generation %}[{{ m.role }}]{% endgeneration %}{% endfor %}",
       "[system][user][assistant]"},
  });
}

TEST(ChatTemplate, ExpressionsFollowPython) {
  expect_all({
      {"{{ 1 + 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 7 / 2 }} {{ 4 / 2 }} {{ 2 ** 10 }}",
       "3 3 -4 2 -2 3.5 2.0 1024"},
      {"{{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1.5e16 }} {{ 1e15 }} {{ 1e-5 }} {{ 0.0001 }} {{ 3.0 }} {{ -0.0 }}",
       "0.30000000000000004 1e+16 1.5e+16 1000000000000000.0 1e-05 0.0001 3.0 -0.0"},
      {"{{ none }} {{ true }} {{ False }} {{ [1, 'a', none, true, 1.0] }} {{ {'a': 1, 'b': [2]} }} {{ (1,) }} {{ (1, "
       "'x') }}",
       "None True False [1, 'a', None, True, 1.0] {'a': 1, 'b': [2]} (1,) (1, 'x')"},
      {"{{ \"it's\" }} {{ [\"it's\", 'say \"hi\"'] }}", "it's [\"it's\", 'say \"hi\"']"},
      {"{{ 'a' if false }}|{{ 'a' if true else 'b' }}|{{ 1 if none else 2 if true else 3 }}", "|a|2"},
      {"{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 'a' in 'cat' }} {{ 'z' not in 'cat' }} {{ not 1 in [1] }} {{ 'a' in {'a': "
       "1} }}",
       "True False True True False True"},
      {"{{ 1 == 1.0 }} {{ true == 1 }} {{ [1, 2] == [1, 2] }} {{ 'a' ~ 1 ~ none }} {{ 0 or '' or 'x' }} {{ 1 and 2 }} "
       "{{ none and 1 }}",
       "True True True a1None x 2 None"},
      {"{{ 'abc' * 2 }} {{ [1] * 3 }} {{ [1] + [2] }} {{ -2 ** 2 }} {{ '%s=%d' % ('a', 3) }} {{ '%05.1f%%' % 2.25 }}",
       "abcabc [1, 1, 1] [1, 2] 4 a=3 002.2%"},
      // Filters bind tighter than + and unary minus applies before them.
      {"{{ '\\n' + '  x  ' | trim + '|' }} {{ -2|abs }}", "\nx| 2"},
      {"{{ '\\x41\\u00e9\\t|' }} {{ 'a\\'b' }} {{ 'a' 'b' }}", "Aé\t| a'b ab"},
  });
}

TEST(ChatTemplate, IndexingSlicingAndAttributes) {
  expect_all({
      {"{{ messages[0].role }} {{ messages[-1]['role'] }} {{ messages[1:]|length }} {{ messages[::-1][0].role }}",
       "system assistant 2 assistant"},
      // Strings index and slice by character, not byte.
      {"{{ 'hello'[1:3] }} {{ 'hello'[::-1] }} {{ 'héllo'[1] }} {{ 'héllo'|length }} {{ 'héllo'[:-1] }}",
       "el olleh é 5 héll"},
      {"{{ [1, 2, 3, 4, 5][1:-1:2] }} {{ [1, 2, 3][5] is defined }} {{ "
       "messages[2].tool_calls[0].function.arguments.a[0] }}",
       "[2, 4] False 1.5"},
      // Missing keys are undefined (printing nothing), not errors.
      {"[{{ messages[0].nothing }}] {{ messages[0].nothing is defined }} {{ messages[7] is defined }}",
       "[] False False"},
      {"{% set d = {'k': 'v'} %}{{ d.k }} {{ d['k'] }} {{ d.get('k') }} {{ d.get('x') }} {{ d.get('x', 2) }}",
       "v v v None 2"},
  });
}

TEST(ChatTemplate, Filters) {
  expect_all({
      {"{{ '  pad  '|trim }}|{{ 'xxhixx'|trim('x') }}|{{ 'Hello'|upper }}|{{ 'Hello'|lower }}|{{ 'hello "
       "world'|capitalize }}|"
       "{{ 'hello wORLD'|title }}",
       "pad|hi|HELLO|hello|Hello world|Hello World"},
      {"{{ 'ß'|upper }} {{ 'ÀÉ'|lower }}", "SS àé"},
      // The title filter starts words after spaces and -([{< only, unlike str.title().
      {"{{ \"it's a-b {'k': 1}\"|title }} {{ \"it's a-b {'k': 1}\".title() }}", "It's A-B {'k': 1} It'S A-B {'K': 1}"},
      {"{{ (1|safe) is string }} {{ 3.0 is odd }} {{ -4.0 is even }}", "True True True"},
      {"{{ 'a-b-c'|replace('-', '+') }} {{ ['a', 'b']|join(', ') }} {{ [1, 2]|join }} {{ nothing|default('d') }} "
       "{{ none|default('x') }} {{ ''|default('y', true) }} {{ ''|d('z', boolean=true) }}",
       "a+b+c a, b 12 d None y z"},
      {"{{ [3, 1, 2]|first }} {{ [3, 1, 2]|last }} {{ 'abc'|first }} {{ [3, 1, 2]|sort }} {{ ['b', 'A', 'c']|sort }} "
       "{{ [3, 1, 2]|sort(reverse=true) }} {{ [1, 2, 2, 'a', 'A']|unique|list }} {{ [1, 2, 3]|reverse|list }} {{ "
       "'abc'|reverse }}",
       "3 2 a [1, 2, 3] ['A', 'b', 'c'] [3, 2, 1] [1, 2, 'a'] [3, 2, 1] cba"},
      {"{{ messages|selectattr('role', 'equalto', 'user')|list|length }} "
       "{{ messages|rejectattr('role', 'equalto', 'user')|map(attribute='role')|join(',') }} "
       "{{ messages|selectattr('tool_calls', 'defined')|list|length }} {{ [0, 1, '', 'x', none]|select|list }} "
       "{{ [1, 2, 3, 4]|reject('odd')|list }} {{ ['a', 'B']|map('upper')|list }} {{ [{'a': 1}, {}]|map(attribute='a', "
       "default=0)|list }}",
       "1 system,assistant 1 [1, 'x'] [2, 4] ['A', 'B'] [1, 0]"},
      {"{{ {'b': 1, 'a': 2}|items|list }} {{ {'b': 1, 'a': 2}|dictsort }} {{ messages|length }} {{ ''|length }} {{ "
       "nothing|length }}",
       "[('b', 1), ('a', 2)] [('a', 2), ('b', 1)] 3 0 0"},
      {"{{ 'x'|int }} {{ '42'|int }} {{ '4.7'|int }} {{ 3.9|int }} {{ '3.5'|float }} {{ -3|abs }} {{ 2.5|round }} {{ "
       "3.5|round }} "
       "{{ 7|round }} {{ 1.23|round(1, 'ceil') }} {{ 5|string }} {{ [1, 2]|sum }} {{ [1, 3, 2]|max }} {{ ['b', "
       "'A']|min }}",
       "0 42 4 3 3.5 3 2.0 4.0 7 1.3 5 3 3 A"},
      {"{{ 'abc'|indent(2) }}|{{ 'a\\nb\\n\\nc'|indent(2) }}|{{ 'a\\nb'|indent(2, true) }}",
       "abc|a\n  b\n\n  c|  a\n  b"},
      {"{{ '%s and %s'|format('a', 1) }} {{ '<a & \"b\">'|escape }} {{ 'x'|safe }} {{ [1, 2]|list|string }}",
       "a and 1 &lt;a &amp; &#34;b&#34;&gt; x [1, 2]"},
  });
}

TEST(ChatTemplate, TojsonIsPythonJsonDumps) {
  expect_all({
      // Key order kept, ", " and ": " separators, non-ASCII unescaped, control characters escaped.
      {"{{ messages[2].tool_calls[0].function.arguments|tojson }}", "{\"b\": 1, \"a\": [1.5, null, true]}"},
      {"{{ messages[1]|tojson }}", "{\"role\": \"user\", \"content\": \"Hi \\\"you\\\" é\"}"},
      {"{{ 'a\\u0001\\t\\n/'|tojson }} {{ 1.0|tojson }} {{ none|tojson }} {{ []|tojson(indent=2) }}",
       "\"a\\u0001\\t\\n/\" 1.0 null []"},
      {"{{ {'a': [1, {'b': none}], 'c': {}}|tojson(indent=2) }}",
       "{\n  \"a\": [\n    1,\n    {\n      \"b\": null\n    }\n  ],\n  \"c\": {}\n}"},
      // The other json.dumps options the Hugging Face filter passes on.
      {"{{ 'é😀'|tojson(ensure_ascii=true) }} {{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }} {{ {'a': [1, "
       "2]}|tojson(separators=(',', ':')) }}",
       "\"\\u00e9\\ud83d\\ude00\" {\"a\": 2, \"b\": 1} {\"a\":[1,2]}"},
  });
}

TEST(ChatTemplate, MethodsOfStringsAndDicts) {
  expect_all({
      {"{{ 'a,b,,c'.split(',') }} {{ '  a  b '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a b c'.rsplit(' ', 1) }} "
       "{{ 'x\\ny\\r\\nz'.splitlines() }}",
       "['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b c'] ['a b', 'c'] ['x', 'y', 'z']"},
      {"{{ '  s  '.strip() }}|{{ '  s  '.lstrip() }}|{{ '  s  '.rstrip() }}|{{ '\\n\\nx\\n'.strip('\\n') }}|",
       "s|s  |  s|x|"},
      {"{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x', 'c')) }} {{ 'abcabc'.find('c') }} {{ 'abc'.find('z') }} "
       "{{ 'a-b'.replace('-', '') }} {{ 'Hi {} {x}'.format(1, x=2) }} {{ 'AbC'.upper() }}{{ 'AbC'.lower() }}",
       "True True 2 -1 ab Hi 1 2 ABCabc"},
      {"{% set c = '<think>\\nwhy\\n</think>\\n\\nanswer' %}{{ c.split('</think>')[-1].lstrip('\\n') }}|"
       "{{ c.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') }}",
       "answer|why"},
      {"{{ {'a': 1, 'b': 2}.keys()|list }} {{ {'a': 1, 'b': 2}.values()|list }} {{ {'a': 1}.items()|list }}",
       "['a', 'b'] [1, 2] [('a', 1)]"},
  });
}

TEST(ChatTemplate, Tests) {
  expect_all({
      {"{{ x is defined }} {{ messages is defined }} {{ x is undefined }} {{ none is none }} {{ 1 is number }} {{ true "
       "is number }} "
       "{{ true is integer }} {{ 1 is integer }} {{ 1.0 is float }} {{ true is boolean }}",
       "False True True True True True False True True True"},
      {"{{ 'a' is string }} {{ {} is mapping }} {{ [] is mapping }} {{ [] is iterable }} {{ 'a' is iterable }} {{ {} "
       "is sequence }} "
       "{{ 'a' is sequence }} {{ 3 is sequence }} {{ x is iterable }}",
       "True True False True True True True False True"},
      {"{{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 'a' is equalto 'a' }} {{ 1 is eq 2 }} {{ false is "
       "sameas false }} "
       "{{ 0 is sameas false }} {{ 1 is in [1, 2] }} {{ true is true }} {{ 0 is false }} {{ 'abc' is lower }} {{ 'A' "
       "is upper }}",
       "True True True True False True False True True False True True"},
      {"{{ 'x' is not none }} {{ not x is defined }} {{ messages[0].content is not string }}", "True True False"},
  });
}

TEST(ChatTemplate, GlobalsAndVariables) {
  expect_all({
      {"{{ bos_token }}|{{ eos_token }}|{{ add_generation_prompt }}", "<s>|</s>|True"},
      {"{{ strftime_now('%d %b %Y') }} {{ strftime_now('%Y-%m-%d %H:%M') }}", "15 Jan 2026 2026-01-15 09:30"},
      {"{{ dict(a=1, b=2) }} {{ range(3)|list }} {{ range(1, 10, 3)|list }} {{ range(3, 0, -1)|list }} {{ "
       "namespace(a=1).a }}",
       "{'a': 1, 'b': 2} [0, 1, 2] [1, 4, 7] [3, 2, 1] 1"},
      {"{{ tools is defined }} {{ enable_thinking is defined }}", "False False"},
  });
  ChatTemplateOptions options;
  options.variables = {{"tools", nlohmann::ordered_json::array({{{"name", "f"}}})}, {"enable_thinking", false}};
  EXPECT_EQ(ChatTemplate::parse("{{ tools[0].name }} {{ enable_thinking }}", "t").render(kMessages, options),
            "f False");
}

TEST(ChatTemplate, RendersPlainMessagesAndUnorderedJson) {
  const ChatTemplate t = ChatTemplate::parse(
      "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}{% if add_generation_prompt %}<assistant>{% "
      "endif %}",
      "t");
  ChatTemplateOptions options;
  EXPECT_EQ(t.render(std::vector<ChatMessage>{{"user", "a"}, {"assistant", "b"}}, options),
            "<user>a<assistant>b<assistant>");
  options.add_generation_prompt = false;
  EXPECT_EQ(t.render(nlohmann::json::parse(R"([{"role": "user", "content": "x"}])"), options), "<user>x");
}

TEST(ChatTemplate, RendersOnSeveralThreadsAtOnce) {
  const ChatTemplate t = ChatTemplate::parse(
      "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}<{{ m.role }}:{{ m.content|upper "
      "}}>{% endfor %}{{ ns.n }}",
      "t");
  const std::string expected = "<system:BE BRIEF.><user:HI \"YOU\" É><assistant:HELLO>3";
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&] {
      for (int k = 0; k < 200; ++k)
        if (t.render(kMessages, ChatTemplateOptions{}) != expected) ++wrong;
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(ChatTemplate, SyntaxErrorsNameTheLine) {
  auto expect_error = [](const std::string& source, const std::string& needle) {
    const std::string e = error_of(source);
    EXPECT_NE(e.find(needle), std::string::npos) << source << " -> " << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;  // one line
  };
  expect_error("a\nb\n{% for %}", "test.jinja line 3: syntax error");
  expect_error("{% if true %}\nunclosed", "line 2: syntax error: unexpected end of template: expected {% endif %}");
  expect_error("\n\n\n{{ 1 | nosuchfilter }}", "line 4: syntax error: no filter named 'nosuchfilter'");
  expect_error("{{ x is nosuchtest }}", "no test named 'nosuchtest'");
  expect_error("x\n{% endif %}", "line 2: syntax error: unexpected 'endif'");
  expect_error("{{ 'unterminated }}", "unterminated string literal");
  expect_error("{% break %}", "'break' outside of a loop");
  expect_error("{% include 'x' %}", "unknown or unsupported tag 'include'");
  expect_error("{{ 1 +* 2 }}", "unexpected '*'");
  expect_error("{# never closed", "unterminated comment");
  // Unknown filters are refused even where the template never goes (as Jinja2 does).
  expect_error("{% if false %}{{ x | nope }}{% endif %}", "no filter named 'nope'");
}

TEST(ChatTemplate, RuntimeErrorsNameTheLine) {
  auto expect_error = [](const std::string& source, const std::string& needle) {
    const std::string e = error_of(source);
    EXPECT_NE(e.find(needle), std::string::npos) << source << " -> " << e;
  };
  expect_error("line 1\n{% if messages|length > 1 %}\n  {{ raise_exception('Only one message, please') }}\n{% endif %}",
               "test.jinja line 3: Only one message, please");
  expect_error("ok\n{{ undefined_var.attr }}", "line 2: 'undefined_var' is undefined");
  expect_error("{{ messages[9].role }}", "has no element 9");
  expect_error("{{\n'a' + 1 }}", "line 2: unsupported operand type(s) for +: 'str' and 'int'");
  expect_error("{{ 'a' < 1 }}", "'<' not supported");
  expect_error("{{ 1 / 0 }}", "division by zero");
  expect_error("{% for x in 5 %}{% endfor %}", "'int' object is not iterable");
  expect_error("{% set s = 'x' %}{% set s.a = 1 %}", "only of a namespace");
  expect_error("{{ x + 1 }}", "'x' is undefined");
  expect_error("{{ nothing() }}", "'nothing' is undefined");
  expect_error("{{ nothing|tojson }}", "'nothing' is undefined");
}

TEST(ChatTemplate, HostileTemplatesStopCleanly) {
  jinja::Limits limits;
  limits.max_steps = 200'000;  // small budget keeps the test fast; the default allows about 1 s of work
  limits.max_string_bytes = 1 << 20;
  auto refuse = [&](const std::string& source, const std::string& needle) {
    try {
      jinja::Template(source, "hostile").render({}, nullptr, limits);
      ADD_FAILURE() << source << " rendered";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << source << " -> " << e.what();
    }
  };
  refuse("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}", "too much work");
  refuse("{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}", "nested more than");
  refuse("{% set ns = namespace(s='ab') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", "MiB");
  refuse("{{ 'x' * 100000000000 }}", "MiB");
  refuse("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}", "nested more than");
  refuse("{{ " + std::string(100000, '-') + "1 }}", "nested more than");
  refuse("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}", "nested too deeply");
  refuse("{{ range(100000000)|length }}", "range()");
  refuse("{{ 2 ** 64 }}", "integer overflow");
}

std::string vocab_with_template(const std::string& name, const std::string* chat_template) {
  const std::string path = testing::temp_path(name);
  gguf::Writer w;
  w.set("general.architecture", gguf::Value::of_string("llama"));
  add_byte_vocab(w);
  if (chat_template) w.set("tokenizer.chat_template", gguf::Value::of_string(*chat_template));
  w.write(path);
  return path;
}

TEST(ChatTemplate, SourcesAndDefaultTokens) {
  const std::string source =
      "{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}{{ eos_token }}";
  const gguf::File with = gguf::File::open(vocab_with_template("with-template.gguf", &source));
  const ChatTemplate t = ChatTemplate::for_file(with);
  EXPECT_EQ(t.origin(), "GGUF tokenizer.chat_template");
  const ChatTemplateOptions options = ChatTemplate::default_options(Tokenizer::from_gguf(with));
  EXPECT_EQ(options.bos_token, "<s>");
  EXPECT_EQ(options.eos_token, "</s>");
  EXPECT_EQ(t.render(std::vector<ChatMessage>{{"user", "hi"}}, options), "<s>[user]hi</s>");

  // A model without a template: the error names the option to use; an override file wins.
  const gguf::File without = gguf::File::open(vocab_with_template("without-template.gguf", nullptr));
  try {
    ChatTemplate::for_file(without);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--chat-template"), std::string::npos) << e.what();
  }
  const std::string file = testing::temp_path("override.jinja");
  { std::ofstream(file) << "override {{ messages|length }}\n"; }
  EXPECT_EQ(ChatTemplate::for_file(without, file).render(std::vector<ChatMessage>{{"user", "x"}}, options),
            "override 1");
  EXPECT_THROW(ChatTemplate::for_file(without, file + ".missing"), Error);
}

TEST(ChatTemplate, FromALoadedModel) {
  const auto model = Model::load(testing::make_model(testing::TinyModel{}));
  const ChatTemplateOptions options = ChatTemplate::default_options(*model);
  EXPECT_EQ(options.bos_token, "<s>");
  EXPECT_EQ(options.eos_token, "</s>");
  try {
    ChatTemplate::for_model(*model);
    ADD_FAILURE() << "the tiny model has no template";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("give one with --chat-template FILE"), std::string::npos) << e.what();
  }
  const std::string file = testing::temp_path("model-override.jinja");
  { std::ofstream(file) << "{{ bos_token }}{{ messages[0].content }}"; }
  EXPECT_EQ(ChatTemplate::for_model(*model, file).render(std::vector<ChatMessage>{{"user", "q"}}, options), "<s>q");
}

TEST(ChatTemplate, MessagesAreChecked) {
  EXPECT_EQ(parse_chat_messages(R"([{"role": "user", "content": "x", "extra": 1}])", "m").size(), 1u);
  EXPECT_NO_THROW(parse_chat_messages(R"([{"role": "assistant", "content": null, "tool_calls": []}])", "m"));
  auto error = [](const std::string& text) {
    try {
      parse_chat_messages(text, "m.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error("[{\"role\": ").find("m.json: not valid JSON"), std::string::npos);
  // A number too large for a double is nlohmann's out_of_range, not its parse_error (found by the
  // chat template fuzzer): still one clear error, not an escaped exception.
  EXPECT_NE(error("[{\"role\": \"user\", \"content\": 1e999}]").find("m.json: not valid JSON (number overflow"),
            std::string::npos);
  EXPECT_NE(error("{}").find("expected a JSON array"), std::string::npos);
  EXPECT_NE(error("[1]").find("message 1 is a number"), std::string::npos);
  EXPECT_NE(error(R"([{"role": "user", "content": "a"}, {"content": "b"}])").find("message 2 has no \"role\""),
            std::string::npos);
  EXPECT_NE(error(R"([{"role": 3, "content": "b"}])").find("\"role\" that is not a string"), std::string::npos);
  EXPECT_NE(error(R"([{"role": "user", "content": 3}])").find("\"content\""), std::string::npos);
}

}  // namespace
}  // namespace kvslim
