// A tiny, real, loadable llama-architecture GGUF model, generated deterministically.
//
// Weights come from a seeded integer PRNG (mulberry32) and an Irwin–Hall normal (sum of 12
// uniforms − 6, exact in binary64, no transcendental functions), so every run on every
// platform writes the same bytes. Token embedding and output weights have std 1 and the output
// rows of the control tokens and of the bytes it may not write are zero, so logits are decisive
// (std ≈ √n_embd) and greedy decoding never picks <unk>/<s>/</s> or an unwritable byte:
// single-node and RPC-split runs agree token for token, and every text is valid UTF-8.
import { GgmlType, GgufValueType, GgufWriter, type GgufTensor } from "./writer";

export interface TinyLlamaDims {
  /** Embedding size (llama.embedding_length). */
  nEmbd: number;
  /** Attention heads (llama.attention.head_count). */
  nHead: number;
  /** Key/value heads (llama.attention.head_count_kv); divides nHead. */
  nHeadKv: number;
  /** Feed-forward size (llama.feed_forward_length). */
  nFf: number;
  /** Transformer blocks (llama.block_count). */
  nLayer: number;
  /** Training context (llama.context_length). */
  nCtx: number;
}

// Head size 64 (nEmbd / nHead): the smallest that ggml-cuda has flash-attention kernels for.
// With 16, a CUDA rpc-server holding every layer aborted in ggml-cuda/fattn.cu: the RPC backend
// reports every op as supported, so `-fa auto` enabled flash attention there. 2.5 MB in all.
export const TINY_LLAMA_DIMS: Readonly<TinyLlamaDims> = Object.freeze({
  nEmbd: 128,
  nHead: 2,
  nHeadKv: 1,
  nFf: 256,
  nLayer: 8,
  nCtx: 256,
});

export const TINY_LLAMA_SEED = 0x5eed_0001;
export const TINY_LLAMA_NAME = "sparkform-tiny-llama";
export const RMS_NORM_EPS = 1e-5;
export const ROPE_FREQ_BASE = 10000;

/** Byte-level SentencePiece vocabulary: <unk>, <s>, </s>, then <0x00> … <0xFF>. */
export const UNK_ID = 0;
export const BOS_ID = 1;
export const EOS_ID = 2;
export const BYTE_TOKEN_OFFSET = 3;
export const N_VOCAB = BYTE_TOKEN_OFFSET + 256;

/** llama.cpp token types (llama_token_type). */
const TOKEN_TYPE_UNKNOWN = 2;
const TOKEN_TYPE_CONTROL = 3;
const TOKEN_TYPE_UNUSED = 5;
const TOKEN_TYPE_BYTE = 6;

/**
 * Whether byte `b` is one the model may write: printable ASCII, tab and newline. Its other
 * byte tokens (the rest of C0, DEL, and 0x80–0xFF, which alone are never valid UTF-8) stay in
 * the vocabulary so that any prompt tokenizes (SentencePiece falls back to `<0xNN>`), but are
 * typed UNUSED, which llama.cpp renders as nothing (llama-vocab.cpp token_to_piece: "we accept
 * all unsupported token types, suppressing them like CONTROL tokens"), and get a zero output
 * row, so greedy decoding never picks them. Every text the model can produce is then valid
 * UTF-8 without a terminal control character: a byte vocabulary made llama-server 80fb11ac
 * answer 500 ("does not match the expected Content-only format") to any OpenAI client.
 */
export function writableByte(b: number): boolean {
  return (b >= 0x20 && b <= 0x7e) || b === 0x09 || b === 0x0a;
}

/** Byte-level SentencePiece vocabulary: <unk>, <s>, </s>, then <0x00> … <0xFF>. */
export function vocabulary(): { tokens: string[]; scores: number[]; types: number[] } {
  const tokens = ["<unk>", "<s>", "</s>"];
  const types = [TOKEN_TYPE_UNKNOWN, TOKEN_TYPE_CONTROL, TOKEN_TYPE_CONTROL];
  for (let b = 0; b < 256; b++) {
    tokens.push(`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`);
    types.push(writableByte(b) ? TOKEN_TYPE_BYTE : TOKEN_TYPE_UNUSED);
  }
  return { tokens, scores: tokens.map(() => 0), types };
}

/** Seeded 32-bit PRNG (mulberry32): integer arithmetic only. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  };
}

/** Approximately N(0, 1): Irwin–Hall with 12 uniforms. Exact in binary64, so portable. */
function normal(next: () => number): number {
  let s = 0;
  for (let i = 0; i < 12; i++) s += next() / 4294967296;
  return s - 6;
}

function randomTensor(next: () => number, n: number, std: number): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = normal(next) * std;
  return out;
}

/** The parts of the model's identity that tests and the Model component check against. */
export function tinyLlamaMetadata(dims: TinyLlamaDims = TINY_LLAMA_DIMS) {
  return {
    architecture: "llama",
    name: TINY_LLAMA_NAME,
    blockCount: dims.nLayer,
    contextLength: dims.nCtx,
    embeddingLength: dims.nEmbd,
    feedForwardLength: dims.nFf,
    headCount: dims.nHead,
    headCountKv: dims.nHeadKv,
    vocabSize: N_VOCAB,
  };
}

/** Build the model's GGUF bytes. Same options → same bytes. */
export function makeTinyLlamaGguf(opts: { dims?: TinyLlamaDims; seed?: number } = {}): Buffer {
  const d = opts.dims ?? TINY_LLAMA_DIMS;
  const seed = opts.seed ?? TINY_LLAMA_SEED;
  if (d.nEmbd % d.nHead !== 0) throw new Error("nEmbd must be a multiple of nHead");
  if (d.nHead % d.nHeadKv !== 0) throw new Error("nHead must be a multiple of nHeadKv");
  const headDim = d.nEmbd / d.nHead;
  const nEmbdKv = headDim * d.nHeadKv;
  const next = mulberry32(seed);
  const vocab = vocabulary();

  const w = new GgufWriter();
  w.string("general.architecture", "llama")
    .string("general.name", TINY_LLAMA_NAME)
    .string("general.license", "apache-2.0")
    .u32("general.file_type", 1) // LLAMA_FTYPE_MOSTLY_F16
    .u32("general.quantization_version", 2)
    .u32("general.alignment", 32)
    .u32("llama.context_length", d.nCtx)
    .u32("llama.embedding_length", d.nEmbd)
    .u32("llama.block_count", d.nLayer)
    .u32("llama.feed_forward_length", d.nFf)
    .u32("llama.attention.head_count", d.nHead)
    .u32("llama.attention.head_count_kv", d.nHeadKv)
    .f32("llama.attention.layer_norm_rms_epsilon", RMS_NORM_EPS)
    .u32("llama.rope.dimension_count", headDim)
    .f32("llama.rope.freq_base", ROPE_FREQ_BASE)
    .u32("llama.vocab_size", N_VOCAB)
    .string("tokenizer.ggml.model", "llama")
    .array("tokenizer.ggml.tokens", GgufValueType.STRING, vocab.tokens)
    .array("tokenizer.ggml.scores", GgufValueType.FLOAT32, vocab.scores)
    .array("tokenizer.ggml.token_type", GgufValueType.INT32, vocab.types)
    .u32("tokenizer.ggml.bos_token_id", BOS_ID)
    .u32("tokenizer.ggml.eos_token_id", EOS_ID)
    .u32("tokenizer.ggml.unknown_token_id", UNK_ID)
    .bool("tokenizer.ggml.add_bos_token", true)
    .bool("tokenizer.ggml.add_eos_token", false);

  const ones = (n: number) => new Float32Array(n).fill(1);
  const add = (name: string, dims: number[], type: GgmlType, data: Float32Array): void => {
    const t: GgufTensor = { name, dims, type, data };
    w.tensor(t);
  };

  // ggml dims: ne[0] = input features (contiguous), ne[1] = output features / rows.
  add(
    "token_embd.weight",
    [d.nEmbd, N_VOCAB],
    GgmlType.F16,
    randomTensor(next, d.nEmbd * N_VOCAB, 1),
  );
  for (let l = 0; l < d.nLayer; l++) {
    const p = `blk.${l}`;
    const sEmbd = 1 / Math.sqrt(d.nEmbd);
    const sFf = 1 / Math.sqrt(d.nFf);
    add(`${p}.attn_norm.weight`, [d.nEmbd], GgmlType.F32, ones(d.nEmbd));
    add(
      `${p}.attn_q.weight`,
      [d.nEmbd, d.nEmbd],
      GgmlType.F16,
      randomTensor(next, d.nEmbd * d.nEmbd, sEmbd),
    );
    add(
      `${p}.attn_k.weight`,
      [d.nEmbd, nEmbdKv],
      GgmlType.F16,
      randomTensor(next, d.nEmbd * nEmbdKv, sEmbd),
    );
    add(
      `${p}.attn_v.weight`,
      [d.nEmbd, nEmbdKv],
      GgmlType.F16,
      randomTensor(next, d.nEmbd * nEmbdKv, sEmbd),
    );
    add(
      `${p}.attn_output.weight`,
      [d.nEmbd, d.nEmbd],
      GgmlType.F16,
      randomTensor(next, d.nEmbd * d.nEmbd, sEmbd),
    );
    add(`${p}.ffn_norm.weight`, [d.nEmbd], GgmlType.F32, ones(d.nEmbd));
    add(
      `${p}.ffn_gate.weight`,
      [d.nEmbd, d.nFf],
      GgmlType.F16,
      randomTensor(next, d.nEmbd * d.nFf, sEmbd),
    );
    add(
      `${p}.ffn_up.weight`,
      [d.nEmbd, d.nFf],
      GgmlType.F16,
      randomTensor(next, d.nEmbd * d.nFf, sEmbd),
    );
    add(
      `${p}.ffn_down.weight`,
      [d.nFf, d.nEmbd],
      GgmlType.F16,
      randomTensor(next, d.nFf * d.nEmbd, sFf),
    );
  }
  add("output_norm.weight", [d.nEmbd], GgmlType.F32, ones(d.nEmbd));
  const output = randomTensor(next, d.nEmbd * N_VOCAB, 1);
  // Control tokens and the bytes it may not write get a zero logit: far below the max of the
  // 97 writable tokens' logits (std ≈ √n_embd ≈ 11), so greedy decoding never picks them.
  vocab.types.forEach((type, id) => {
    if (type !== TOKEN_TYPE_BYTE) output.fill(0, id * d.nEmbd, (id + 1) * d.nEmbd);
  });
  add("output.weight", [d.nEmbd, N_VOCAB], GgmlType.F16, output);
  return w.toBuffer();
}
