"""create_chat_completion: OpenAI-shaped results, streaming, and the server's rendering."""

import pytest

import kvslim

MESSAGES = [{"role": "system", "content": "You keep codes."},
            {"role": "user", "content": "The code of box 12 is 451. The code of box 9 is 77. What is box 12?"}]


def test_completion_shape(model, template_path):
    r = model.create_chat_completion(MESSAGES, max_tokens=12, seed=4, chat_template=template_path,
                                     press="snapkv", budget=16, window=8)
    assert r["object"] == "chat.completion" and r["id"].startswith("chatcmpl-")
    choice = r["choices"][0]
    assert choice["message"]["role"] == "assistant" and isinstance(choice["message"]["content"], str)
    assert choice["finish_reason"] in ("stop", "length")
    usage = r["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert usage["completion_tokens"] <= 12
    assert r["kv"]["press"] == "snapkv" and r["kv"]["kept_tokens"] <= 16 + 12


def test_stream_gives_the_same_text(model, template_path):
    whole = model.create_chat_completion(MESSAGES, max_tokens=16, seed=9, chat_template=template_path)
    chunks = list(model.create_chat_completion(MESSAGES, max_tokens=16, seed=9, chat_template=template_path,
                                               stream=True))
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert text == whole["choices"][0]["message"]["content"]
    assert chunks[-1]["choices"][0]["finish_reason"] == whole["choices"][0]["finish_reason"]
    assert chunks[-1]["usage"] == whole["usage"]


def test_prompt_is_the_rendered_template(model, template_path):
    # The prompt tokens are the template's rendering of the messages, as the server counts them.
    r = model.create_chat_completion(MESSAGES, max_tokens=1, temperature=0, chat_template=template_path)
    assert r["usage"]["prompt_tokens"] > len(model.tokenize(MESSAGES[1]["content"], add_bos=False))


@pytest.mark.parametrize("messages,message", [([], "empty"), ([{"role": "user"}], "content"),
                                              (["hi"], "dict")])
def test_bad_messages(model, template_path, messages, message):
    with pytest.raises(ValueError, match=message):
        model.create_chat_completion(messages, chat_template=template_path)


def test_stream_raises_the_engine_error(model, template_path):
    chunks = model.create_chat_completion(MESSAGES, chat_template=str(template_path) + ".missing", stream=True)
    with pytest.raises(kvslim.Error, match="missing"):
        list(chunks)
