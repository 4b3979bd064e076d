"""RNN, LSTM and GRU unrolled over time into their cells.

Per layer and direction, the input projection of every time step is one contraction
(``x @ W_ih^T + b_ih`` over the whole sequence, as cuDNN does); each step then does the
recurrent contraction ``h @ W_hh^T`` and the gate arithmetic. Steps read their slice of the
projection through views; the outputs of the steps are joined by a concat over time.

From the third step on, the steps are not lowered again: they are instances of the second
(:mod:`..repeat_steps`), emitted at once and written to the file as one repeat block (format 1.4).
"""

from __future__ import annotations

from ....format.repeat import fill
from ..ctx import Args, LowerCtx, T
from ..registry import NoLowering, rule
from ..repeat_steps import repeat_outputs, repeat_steps
from .matmul import matmul_t
from .shape import concat, select_dim, slice_dim


def _linear(ctx: LowerCtx, x: T, w: T, b: T | None, suffix: str) -> T:
    y = matmul_t(ctx, x, w, f"{suffix}.mm" if b is not None else suffix)
    if b is None:
        return y
    ctx.b.bind(b.name, [ctx.ranks(y)[-1]])
    return ctx.ew("add", y, b, suffix=suffix)


def _bind_weights(ctx: LowerCtx, w_ih: T, w_hh: T, xr_last: str, hidden: int) -> None:
    g = ctx.b.rank("G", ctx.shape(w_ih)[0])
    h = ctx.b.rank("HID", hidden, {g})
    ctx.b.bind(w_ih.name, [g, xr_last])
    ctx.b.bind(w_hh.name, [g, h])


def _run(ctx: LowerCtx, a: Args, cell: str) -> tuple:
    x = a.input
    hx = list(a.hx) if isinstance(a.hx, (list, tuple)) else [a.hx]
    params = list(a.params)
    layers, bidir, batch_first = int(a.num_layers), bool(a.bidirectional), bool(a.batch_first)
    dirs = 2 if bidir else 1
    per = 4 if a.has_biases else 2
    if len(params) != per * layers * dirs:
        raise NoLowering("recurrent layer with projections (proj_size)")
    xs = ctx.shape(x)
    if len(xs) != 3:
        raise NoLowering("unbatched recurrent input")
    tdim = 1 if batch_first else 0
    steps = xs[tdim]
    hidden = ctx.shape(hx[0])[-1]
    finals: list[list[T]] = [[] for _ in hx]
    layer_in = x
    for layer in range(layers):
        outs_dir = []
        for d in range(dirs):
            k = layer * dirs + d
            p = params[per * k:per * (k + 1)]
            w_ih, w_hh = p[0], p[1]
            b_ih, b_hh = (p[2], p[3]) if a.has_biases else (None, None)
            tag = f"l{layer}{'r' if d else ''}"
            _bind_weights(ctx, w_ih, w_hh, ctx.ranks(layer_in)[-1], hidden)
            xw = _linear(ctx, layer_in, w_ih, b_ih, f"{tag}.xw")
            state = [select_dim(ctx, s, 0, k, suffix=f"{tag}.init{i}") for i, s in enumerate(hx)]
            order = list(range(steps - 1, -1, -1)) if d else list(range(steps))
            hs: dict[int, T] = {}
            mark = (0, 0)
            for p, t in enumerate(order):
                if p == 1:
                    mark = (len(ctx.b.nodes), len(ctx.b.tensors))
                if p == 2 and ctx.repeat and (rest := repeat_steps(ctx, f"{ctx.name}.{tag}", order, mark, tdim,
                                                                   [s.name for s in state])) is not None:
                    hs.update({u: T(fill(rest[0], "t", u)) for u in order[2:]})
                    state = [T(fill(n, "t", order[-1])) for n in rest]
                    break
                xt = select_dim(ctx, xw, tdim, t, suffix=f"{tag}.x{t}")
                state = _cell(ctx, cell, xt, state, w_hh, b_hh, hidden, f"{tag}.t{t}")
                hs[t] = state[0]
            for i, s in enumerate(state):
                finals[i].append(s)
            seq = _outputs(ctx, hs, steps, tdim, tag)
            outs_dir.append(concat(ctx, seq, tdim, suffix=f"{tag}.out") if steps > 1 else seq[0])
        layer_in = concat(ctx, outs_dir, 2, suffix=f"l{layer}.out") if dirs > 1 else outs_dir[0]
    stacked = []
    for i, fs in enumerate(finals):
        parts = [ctx.reshape(f, [1] + list(ctx.shape(f)), suffix=f"final{i}.{j}") for j, f in enumerate(fs)]
        stacked.append(concat(ctx, parts, 0, suffix=f"final{i}") if len(parts) > 1 else parts[0])
    return (layer_in, *stacked)


def _outputs(ctx: LowerCtx, hs: dict[int, T], steps: int, tdim: int, tag: str) -> list[T]:
    """Each step's state with a time dim of 1 (to concat along time): two reshapes lowered, the rest
    their instances (``repeat_outputs``) when the context emits repeats."""
    seq: list[T] = []
    for t in range(steps):
        if t == 2 and ctx.repeat and (names := repeat_outputs(ctx, f"{ctx.name}.{tag}", steps)) is not None:
            return seq + [T(n) for n in names]
        seq.append(ctx.reshape(hs[t], _insert(ctx.shape(hs[t]), tdim), suffix=f"{tag}.o{t}"))
    return seq


def _insert(shape: tuple[int, ...], dim: int) -> list[int]:
    s = list(shape)
    s.insert(dim, 1)
    return s


def _cell(ctx: LowerCtx, cell: str, xt: T, state: list[T], w_hh: T, b_hh: T | None, hidden: int,
          tag: str) -> list[T]:
    h = state[0]
    hw = _linear(ctx, h, w_hh, b_hh, f"{tag}.hw")
    if cell == "lstm":
        g = ctx.ew("add", xt, hw, suffix=f"{tag}.gates")
        i, f, gg, o = (slice_dim(ctx, g, -1, j * hidden, (j + 1) * hidden, 1, f"{tag}.g{j}") for j in range(4))
        i = ctx.ew("sigmoid", i, suffix=f"{tag}.i")
        f = ctx.ew("sigmoid", f, suffix=f"{tag}.f")
        gg = ctx.ew("tanh", gg, suffix=f"{tag}.g")
        o = ctx.ew("sigmoid", o, suffix=f"{tag}.o")
        c = ctx.ew("add", ctx.ew("mul", f, state[1], suffix=f"{tag}.fc"), ctx.ew("mul", i, gg, suffix=f"{tag}.ig"),
                   suffix=f"{tag}.c")
        h = ctx.ew("mul", o, ctx.ew("tanh", c, suffix=f"{tag}.tc"), suffix=f"{tag}.h")
        return [h, c]
    if cell == "gru":
        xr_, xz, xn = (slice_dim(ctx, xt, -1, j * hidden, (j + 1) * hidden, 1, f"{tag}.x{j}") for j in range(3))
        hr, hz, hn = (slice_dim(ctx, hw, -1, j * hidden, (j + 1) * hidden, 1, f"{tag}.h{j}") for j in range(3))
        r = ctx.ew("sigmoid", ctx.ew("add", xr_, hr, suffix=f"{tag}.rp"), suffix=f"{tag}.r")
        z = ctx.ew("sigmoid", ctx.ew("add", xz, hz, suffix=f"{tag}.zp"), suffix=f"{tag}.z")
        n = ctx.ew("tanh", ctx.ew("add", xn, ctx.ew("mul", r, hn, suffix=f"{tag}.rh"), suffix=f"{tag}.np"),
                   suffix=f"{tag}.n")
        # h' = n + z * (h - n)
        hnew = ctx.ew("add", n, ctx.ew("mul", z, ctx.ew("sub", h, n, suffix=f"{tag}.hmn"), suffix=f"{tag}.zd"),
                      suffix=f"{tag}.h")
        return [hnew]
    pre = ctx.ew("add", xt, hw, suffix=f"{tag}.pre")
    return [ctx.ew("tanh" if cell == "rnn_tanh" else "relu", pre, suffix=f"{tag}.h")]


@rule("aten.lstm.input")
def lstm(ctx: LowerCtx, a: Args) -> tuple:
    return _run(ctx, a, "lstm")


@rule("aten.gru.input")
def gru(ctx: LowerCtx, a: Args) -> tuple:
    return _run(ctx, a, "gru")


@rule("aten.rnn_tanh.input", "aten.rnn_relu.input")
def rnn(ctx: LowerCtx, a: Args) -> tuple:
    return _run(ctx, a, "rnn_tanh" if ctx.op == "aten.rnn_tanh" else "rnn_relu")
