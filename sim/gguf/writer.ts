// A small GGUF v3 writer: header, typed KV metadata, tensor infos, aligned tensor data.
// Spec: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md (little-endian throughout).

export const GGUF_MAGIC = 0x46554747; // "GGUF" read as a little-endian u32
export const GGUF_VERSION = 3;
export const GGUF_DEFAULT_ALIGNMENT = 32;

/** GGUF metadata value types. */
export enum GgufValueType {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
}

/** The ggml tensor types this writer emits. */
export enum GgmlType {
  F32 = 0,
  F16 = 1,
}

export type GgufScalarType = Exclude<GgufValueType, GgufValueType.ARRAY>;

export type GgufValue =
  | { type: GgufScalarType; value: number | bigint | boolean | string }
  | {
      type: GgufValueType.ARRAY;
      itemType: GgufScalarType;
      value: ReadonlyArray<number | bigint | boolean | string>;
    };

export interface GgufTensor {
  name: string;
  /** Dimensions in ggml order: ne[0] (the contiguous one) first. */
  dims: number[];
  type: GgmlType;
  /** Values in row-major order of the reversed dims (ne[0] fastest); converted to `type`. */
  data: Float32Array;
}

/** Growable little-endian byte sink. */
class ByteSink {
  private buf = Buffer.alloc(1 << 16);
  length = 0;

  private reserve(n: number): void {
    if (this.length + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.length + n) size *= 2;
    const next = Buffer.alloc(size);
    this.buf.copy(next, 0, 0, this.length);
    this.buf = next;
  }
  u8(v: number): void {
    this.reserve(1);
    this.buf.writeUInt8(v, this.length);
    this.length += 1;
  }
  i8(v: number): void {
    this.reserve(1);
    this.buf.writeInt8(v, this.length);
    this.length += 1;
  }
  u16(v: number): void {
    this.reserve(2);
    this.buf.writeUInt16LE(v, this.length);
    this.length += 2;
  }
  i16(v: number): void {
    this.reserve(2);
    this.buf.writeInt16LE(v, this.length);
    this.length += 2;
  }
  u32(v: number): void {
    this.reserve(4);
    this.buf.writeUInt32LE(v, this.length);
    this.length += 4;
  }
  i32(v: number): void {
    this.reserve(4);
    this.buf.writeInt32LE(v, this.length);
    this.length += 4;
  }
  f32(v: number): void {
    this.reserve(4);
    this.buf.writeFloatLE(v, this.length);
    this.length += 4;
  }
  f64(v: number): void {
    this.reserve(8);
    this.buf.writeDoubleLE(v, this.length);
    this.length += 8;
  }
  u64(v: number | bigint): void {
    this.reserve(8);
    this.buf.writeBigUInt64LE(BigInt(v), this.length);
    this.length += 8;
  }
  i64(v: number | bigint): void {
    this.reserve(8);
    this.buf.writeBigInt64LE(BigInt(v), this.length);
    this.length += 8;
  }
  bytes(b: Uint8Array): void {
    this.reserve(b.length);
    this.buf.set(b, this.length);
    this.length += b.length;
  }
  str(s: string): void {
    const b = Buffer.from(s, "utf8");
    this.u64(b.length);
    this.bytes(b);
  }
  padTo(alignment: number): void {
    const pad = (alignment - (this.length % alignment)) % alignment;
    this.reserve(pad);
    this.buf.fill(0, this.length, this.length + pad);
    this.length += pad;
  }
  toBuffer(): Buffer {
    return Buffer.from(this.buf.subarray(0, this.length));
  }
}

/** IEEE 754 binary32 → binary16 bits, round to nearest even (what numpy's astype(float16) does). */
export function f32ToF16Bits(value: number): number {
  const f32 = new Float32Array(1);
  const u32 = new Uint32Array(f32.buffer);
  f32[0] = value;
  const x = u32[0] ?? 0;
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0); // inf / nan
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00; // overflow → inf
  if (e <= 0) {
    if (e < -10) return sign; // underflow → ±0
    mant |= 0x800000; // implicit leading 1
    const shift = 14 - e;
    let half = mant >>> shift;
    const rem = mant & ((1 << shift) - 1);
    const mid = 1 << (shift - 1);
    if (rem > mid || (rem === mid && half & 1)) half += 1;
    return sign | half;
  }
  let half = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && half & 1)) half += 1; // a carry into the exponent is correct
  return sign | half;
}

function tensorByteSize(t: GgufTensor): number {
  const n = t.dims.reduce((a, b) => a * b, 1);
  if (n !== t.data.length) {
    throw new Error(
      `tensor ${t.name}: dims ${t.dims.join("x")} hold ${n} values, data has ${t.data.length}`,
    );
  }
  return n * (t.type === GgmlType.F32 ? 4 : 2);
}

/** Collects KV metadata and tensors and serialises them as one GGUF v3 file. */
export class GgufWriter {
  private readonly kv: Array<[string, GgufValue]> = [];
  private readonly tensors: GgufTensor[] = [];
  constructor(readonly alignment: number = GGUF_DEFAULT_ALIGNMENT) {}

  add(key: string, value: GgufValue): this {
    if (this.kv.some(([k]) => k === key)) throw new Error(`duplicate GGUF key ${key}`);
    this.kv.push([key, value]);
    return this;
  }
  string(key: string, v: string): this {
    return this.add(key, { type: GgufValueType.STRING, value: v });
  }
  u32(key: string, v: number): this {
    return this.add(key, { type: GgufValueType.UINT32, value: v });
  }
  i32(key: string, v: number): this {
    return this.add(key, { type: GgufValueType.INT32, value: v });
  }
  f32(key: string, v: number): this {
    return this.add(key, { type: GgufValueType.FLOAT32, value: v });
  }
  bool(key: string, v: boolean): this {
    return this.add(key, { type: GgufValueType.BOOL, value: v });
  }
  array(
    key: string,
    itemType: GgufScalarType,
    v: ReadonlyArray<number | bigint | boolean | string>,
  ): this {
    return this.add(key, { type: GgufValueType.ARRAY, itemType, value: v });
  }
  tensor(t: GgufTensor): this {
    if (this.tensors.some((x) => x.name === t.name)) throw new Error(`duplicate tensor ${t.name}`);
    tensorByteSize(t);
    this.tensors.push(t);
    return this;
  }

  private static scalar(
    out: ByteSink,
    type: GgufScalarType,
    v: number | bigint | boolean | string,
  ): void {
    switch (type) {
      case GgufValueType.UINT8:
        return out.u8(Number(v));
      case GgufValueType.INT8:
        return out.i8(Number(v));
      case GgufValueType.UINT16:
        return out.u16(Number(v));
      case GgufValueType.INT16:
        return out.i16(Number(v));
      case GgufValueType.UINT32:
        return out.u32(Number(v));
      case GgufValueType.INT32:
        return out.i32(Number(v));
      case GgufValueType.FLOAT32:
        return out.f32(Number(v));
      case GgufValueType.BOOL:
        return out.u8(v ? 1 : 0);
      case GgufValueType.STRING:
        return out.str(String(v));
      case GgufValueType.UINT64:
        return out.u64(typeof v === "bigint" ? v : BigInt(Number(v)));
      case GgufValueType.INT64:
        return out.i64(typeof v === "bigint" ? v : BigInt(Number(v)));
      case GgufValueType.FLOAT64:
        return out.f64(Number(v));
    }
  }

  toBuffer(): Buffer {
    const out = new ByteSink();
    const kv: Array<[string, GgufValue]> = [...this.kv];
    if (this.alignment !== GGUF_DEFAULT_ALIGNMENT && !kv.some(([k]) => k === "general.alignment")) {
      kv.push(["general.alignment", { type: GgufValueType.UINT32, value: this.alignment }]);
    }
    out.u32(GGUF_MAGIC);
    out.u32(GGUF_VERSION);
    out.u64(this.tensors.length);
    out.u64(kv.length);
    for (const [key, v] of kv) {
      out.str(key);
      out.u32(v.type);
      if (v.type === GgufValueType.ARRAY) {
        out.u32(v.itemType);
        out.u64(v.value.length);
        for (const item of v.value) GgufWriter.scalar(out, v.itemType, item);
      } else {
        GgufWriter.scalar(out, v.type, v.value);
      }
    }
    let offset = 0;
    for (const t of this.tensors) {
      out.str(t.name);
      out.u32(t.dims.length);
      for (const d of t.dims) out.u64(d);
      out.u32(t.type);
      out.u64(offset);
      offset += tensorByteSize(t);
      offset += (this.alignment - (offset % this.alignment)) % this.alignment;
    }
    out.padTo(this.alignment);
    for (const t of this.tensors) {
      const bytes = Buffer.alloc(tensorByteSize(t));
      if (t.type === GgmlType.F32) {
        for (let i = 0; i < t.data.length; i++) bytes.writeFloatLE(t.data[i] ?? 0, i * 4);
      } else {
        for (let i = 0; i < t.data.length; i++)
          bytes.writeUInt16LE(f32ToF16Bits(t.data[i] ?? 0), i * 2);
      }
      out.bytes(bytes);
      out.padTo(this.alignment);
    }
    return out.toBuffer();
  }
}
