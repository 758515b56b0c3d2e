"""memgrad's CharLM (examples/charlm/charlm_model.cpp, engine/nn/attention.cpp) written in
PyTorch, layer for layer: token and position embeddings, pre-norm blocks (attention by matmul,
masked softmax, a tanh-GELU MLP of 4x the width), a final LayerNorm and the head. The GPU kit's
comparison (examples/gpu/compare_pytorch.py) and the snapshot recorder
(tools/pytorch_snapshot.py) run it; `torch` is passed in, so importing this needs no PyTorch.
"""


def charlm(torch, vocab, width, layers, heads, context):
    """A CharLM module (not moved to a device)."""
    nn = torch.nn

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
            pos = torch.arange(context)
            self.register_buffer("future", pos.unsqueeze(0) > pos.unsqueeze(1))

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = (t.view(B, T, heads, C // heads).transpose(1, 2)
                       for t in self.qkv(x).split(C, 2))
            att = (q @ k.transpose(-2, -1)) * (1.0 / (C // heads) ** 0.5)
            att = att.masked_fill(self.future[:T, :T], float("-inf")).softmax(-1)
            return self.proj((att @ v).transpose(1, 2).contiguous().view(B, T, C))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.attn, self.ln2 = nn.LayerNorm(width), Attention(), nn.LayerNorm(width)
            self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(approximate="tanh"),
                                     nn.Linear(4 * width, width))

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    class CharLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok_emb, self.pos_emb = nn.Embedding(vocab, width), nn.Embedding(context, width)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln_f, self.head = nn.LayerNorm(width), nn.Linear(width, vocab)

        def forward(self, idx):
            h = self.tok_emb(idx) + self.pos_emb(torch.arange(idx.shape[1], device=idx.device))
            for block in self.blocks:
                h = block(h)
            return self.head(self.ln_f(h))

    return CharLM()
