"""models.py: the two example models, defined here (nothing downloaded): a small ResNet-style CNN
with attention pooling, and a small GPT-style transformer; synthetic data for each."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)

    def forward(self, x):
        return F.relu(x + self.conv2(F.relu(self.conv1(x))))


class TinyResNet(nn.Module):
    """stem conv -> two residual blocks -> attention pooling (softmax over positions, bmm) ->
    linear classifier."""

    def __init__(self, c=8, classes=10):
        super().__init__()
        self.stem = nn.Conv2d(3, c, 3, stride=1, padding=1, bias=True)
        self.layer1 = Block(c)
        self.layer2 = Block(c)
        self.score = nn.Linear(c, 1)
        self.fc = nn.Linear(c, classes)

    def forward(self, x):
        h = self.layer2(self.layer1(F.relu(self.stem(x))))
        n, c, hh, ww = h.shape
        seq = h.flatten(2).transpose(1, 2)                           # [N, HW, C]
        w = F.softmax(self.score(seq).squeeze(-1), dim=-1)           # [N, HW]
        pooled = torch.bmm(w.unsqueeze(1), seq).squeeze(1)           # [N, C]
        return self.fc(pooled)


class Attention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        sh = lambda y: y.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
        o = F.scaled_dot_product_attention(sh(q), sh(k), sh(v), is_causal=True)
        return self.proj(o.transpose(1, 2).reshape(b, t, d))


class GPTBlock(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = Attention(d, heads)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class TinyGPT(nn.Module):
    def __init__(self, vocab=64, d=32, heads=2, layers=2, seq=16):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq, d)
        self.blocks = nn.ModuleList([GPTBlock(d, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t))
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln_f(x))


def cnn_batch(g, n=16, classes=10):
    """Images whose class is the quadrant of a bright blob (learnable in a few steps)."""
    y = torch.randint(0, classes, (n,), generator=g)
    x = 0.1 * torch.randn(n, 3, 12, 12, generator=g)
    for i in range(n):
        r, c = (int(y[i]) % 4) // 2 * 6, (int(y[i]) % 2) * 6
        x[i, int(y[i]) % 3, r:r + 6, c:c + 6] += 1.0 + 0.1 * (int(y[i]) // 4)
    return x, y


def gpt_batch(g, n=8, seq=16, vocab=64):
    """Sequences counting up modulo the vocabulary from a random start: next token = +1."""
    start = torch.randint(0, vocab, (n, 1), generator=g)
    s = (start + torch.arange(seq + 1)) % vocab
    return s[:, :-1], s[:, 1:]


def train_cnn(model, steps, g, step_hook=None):
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4,
                          fused=True)
    for it in range(steps):
        x, y = cnn_batch(g)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        if step_hook:
            step_hook(it, loss.item())
        opt.step()
    return loss.item()


def train_gpt(model, steps, g, step_hook=None):
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01, fused=True)
    for it in range(steps):
        x, y = gpt_batch(g)
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        if step_hook:
            step_hook(it, loss.item())
        opt.step()
    return loss.item()
