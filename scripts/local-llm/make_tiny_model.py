#!/usr/bin/env python3
"""Create a tiny random-weight Llama model from nothing (no hub access).

The project's copy of ../shared/local-llm/make_tiny_model.py (context raised
to 8192 tokens).

    python make_tiny_model.py OUT_DIR [--gguf]

OUT_DIR gets a Hugging Face folder (config.json, model.safetensors,
tokenizer.json, tokenizer_config.json with a ChatML + tools chat template)
that vLLM serves; with --gguf also OUT_DIR/tiny-llama-f32.gguf (same weights)
for llama.cpp. Needs: numpy, tokenizers, safetensors; gguf for --gguf.
Deterministic: same package versions give byte-identical files.
"""
import json
import sys
from pathlib import Path

import numpy as np
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

SEED = 1234
# 8192 tokens of context: an agent's prompt carries its tool schemas and the
# task, which overflow 2048 tokens of this tiny byte-level vocabulary.
HIDDEN, LAYERS, HEADS, KV_HEADS, FFN, CTX = 128, 2, 2, 2, 256, 8192
HEAD_DIM = HIDDEN // HEADS  # 64: a head size every CPU attention kernel supports
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]  # ids 0, 1, 2
TOOL_TOKENS = ["<tool_call>", "</tool_call>"]  # plain added tokens (hermes parser)
EOS, PAD = "<|im_end|>", "<|endoftext|>"

# ChatML with Hermes-style tools (same shape as Qwen2.5's template).
CHAT_TEMPLATE = """\
{%- if tools %}<|im_start|>system
{% if messages[0].role == 'system' %}{{ messages[0].content }}

{% endif %}# Tools
You may call one or more functions. Function signatures:
<tools>
{% for t in tools %}{{ t | tojson }}
{% endfor %}</tools>
Answer a call with <tool_call>{"name": <name>, "arguments": <args>}</tool_call><|im_end|>
{% elif messages[0].role == 'system' %}<|im_start|>system
{{ messages[0].content }}<|im_end|>
{% endif %}
{%- for m in messages %}
{%- if m.role == 'assistant' %}<|im_start|>assistant
{% if m.content %}{{ m.content }}{% endif %}
{%- for tc in m.tool_calls or [] %}<tool_call>
{"name": "{{ tc.function.name }}", "arguments": {{ tc.function.arguments if tc.function.arguments is string else tc.function.arguments | tojson }}}
</tool_call>{% endfor %}<|im_end|>
{% elif m.role == 'tool' %}<|im_start|>user
<tool_response>
{{ m.content }}
</tool_response><|im_end|>
{% elif m.role != 'system' %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""

CORPUS = """The scheduler starts an inference server on a compute node and waits
until the health check answers. Agents send chat completion requests with
tools, read the tool calls, run them, and send the results back. A job that
fails is retried on another node; logs are written next to the results.
Hello world! What is the weather in Paris today? It is sunny and warm.
{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}
0 1 2 3 4 5 6 7 8 9 10 100 1000 -- user assistant system tool function
""".splitlines()


def build_tokenizer() -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=512, special_tokens=SPECIAL, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS * 10, trainer)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in TOOL_TOKENS])
    return tok


def build_weights(vocab: int) -> dict:
    rng = np.random.default_rng(SEED)

    def w(*shape, std=0.02):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    t = {"model.embed_tokens.weight": w(vocab, HIDDEN, std=1.0),
         "model.norm.weight": np.ones(HIDDEN, np.float32),
         "lm_head.weight": w(vocab, HIDDEN, std=0.5)}
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = np.ones(HIDDEN, np.float32)
        t[p + "post_attention_layernorm.weight"] = np.ones(HIDDEN, np.float32)
        t[p + "self_attn.q_proj.weight"] = w(HEADS * HEAD_DIM, HIDDEN)
        t[p + "self_attn.k_proj.weight"] = w(KV_HEADS * HEAD_DIM, HIDDEN)
        t[p + "self_attn.v_proj.weight"] = w(KV_HEADS * HEAD_DIM, HIDDEN)
        t[p + "self_attn.o_proj.weight"] = w(HIDDEN, HEADS * HEAD_DIM)
        t[p + "mlp.gate_proj.weight"] = w(FFN, HIDDEN)
        t[p + "mlp.up_proj.weight"] = w(FFN, HIDDEN)
        t[p + "mlp.down_proj.weight"] = w(HIDDEN, FFN)
    return t


def write_hf(out: Path, tok: Tokenizer, weights: dict) -> None:
    from safetensors.numpy import save_file

    vocab = tok.get_vocab_size(with_added_tokens=True)
    ids = {s: tok.token_to_id(s) for s in SPECIAL}
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "vocab_size": vocab, "hidden_size": HIDDEN, "intermediate_size": FFN,
        "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM, "hidden_act": "silu",
        "max_position_embeddings": CTX, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
        "attention_bias": False, "mlp_bias": False, "tie_word_embeddings": False,
        "bos_token_id": ids[PAD], "eos_token_id": ids[EOS], "pad_token_id": ids[PAD],
        "torch_dtype": "float32",
    }
    gen = {"bos_token_id": ids[PAD], "eos_token_id": [ids[EOS], ids[PAD]],
           "pad_token_id": ids[PAD]}
    tok_cfg = {
        "tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": CTX,
        "bos_token": None, "eos_token": EOS, "pad_token": PAD, "unk_token": None,
        "add_bos_token": False, "add_eos_token": False,
        "clean_up_tokenization_spaces": False, "chat_template": CHAT_TEMPLATE,
    }
    for name, obj in [("config.json", config), ("generation_config.json", gen),
                      ("tokenizer_config.json", tok_cfg),
                      ("special_tokens_map.json", {"eos_token": EOS, "pad_token": PAD})]:
        (out / name).write_text(json.dumps(obj, indent=2) + "\n")
    tok.save(str(out / "tokenizer.json"))
    save_file(weights, str(out / "model.safetensors"), metadata={"format": "pt"})


def write_gguf(path: Path, tok: Tokenizer, weights: dict) -> None:
    import gguf

    vocab = tok.get_vocab_size(with_added_tokens=True)
    tokens = [tok.id_to_token(i) for i in range(vocab)]
    types = [gguf.TokenType.CONTROL if t in SPECIAL else
             gguf.TokenType.USER_DEFINED if t in TOOL_TOKENS else
             gguf.TokenType.NORMAL for t in tokens]
    merges = json.loads(tok.to_str())["model"]["merges"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in merges]

    g = gguf.GGUFWriter(str(path), "llama")
    g.add_name("tiny-llama")
    g.add_context_length(CTX)
    g.add_embedding_length(HIDDEN)
    g.add_block_count(LAYERS)
    g.add_feed_forward_length(FFN)
    g.add_head_count(HEADS)
    g.add_head_count_kv(KV_HEADS)
    g.add_rope_dimension_count(HEAD_DIM)
    g.add_rope_freq_base(10000.0)
    g.add_layer_norm_rms_eps(1e-5)
    g.add_vocab_size(vocab)
    g.add_file_type(gguf.LlamaFileType.ALL_F32)
    g.add_tokenizer_model("gpt2")
    g.add_tokenizer_pre("default")
    g.add_token_list(tokens)
    g.add_token_types(types)
    g.add_token_merges(merges)
    g.add_bos_token_id(tok.token_to_id(PAD))
    g.add_eos_token_id(tok.token_to_id(EOS))
    g.add_pad_token_id(tok.token_to_id(PAD))
    g.add_add_bos_token(False)
    g.add_chat_template(CHAT_TEMPLATE)

    def permute(x, n_head):  # HF rotate-half rope -> llama.cpp interleaved rope
        return x.reshape(n_head, 2, x.shape[0] // n_head // 2, -1).swapaxes(1, 2).reshape(x.shape)

    names = {"model.embed_tokens.weight": "token_embd.weight",
             "model.norm.weight": "output_norm.weight", "lm_head.weight": "output.weight"}
    per_layer = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
                 "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
                 "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
                 "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
    for name, x in weights.items():
        if name.startswith("model.layers."):
            i, rest = name[len("model.layers."):].split(".", 1)
            rest = rest.removesuffix(".weight")
            if rest == "self_attn.q_proj":
                x = permute(x, HEADS)
            elif rest == "self_attn.k_proj":
                x = permute(x, KV_HEADS)
            gname = f"blk.{i}.{per_layer[rest]}.weight"
        else:
            gname = names[name]
        g.add_tensor(gname, np.ascontiguousarray(x))
    g.write_header_to_file()
    g.write_kv_data_to_file()
    g.write_tensors_to_file()
    g.close()


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 1:
        sys.exit(__doc__)
    out = Path(args[0])
    out.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer()
    weights = build_weights(tok.get_vocab_size(with_added_tokens=True))
    write_hf(out, tok, weights)
    if "--gguf" in sys.argv:
        write_gguf(out / "tiny-llama-f32.gguf", tok, weights)
    print(f"wrote {out} (vocab {tok.get_vocab_size(with_added_tokens=True)})")


if __name__ == "__main__":
    main()
