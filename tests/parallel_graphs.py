"""Hand-written graphs for the many-chip tests (tests/backends/parallel/test_parallel_*.py)."""

from __future__ import annotations

import solar_io

TAIL = ["validation:", "  status: skipped", "  method: none", "  reason: hand-written for the parallel tests"]


def HEADER(name: str, version: str = "1.0") -> list[str]:  # noqa: N802 - a constant-like helper
    """The first lines of a hand-written graph file."""
    return ["format: solar-io.einsum-graph", f'version: "{version}"', f"name: {name}", "producer:",
            "  tool: solar-io", "  tool_version: 0.1.0", "  frontend: hand-written"]


def stack(layers: int, b: int = 64, d: int = 512, h: int = 2048) -> solar_io.Graph:
    """``layers`` residual MLP blocks: x_{l+1} = x_l + relu(x_l W1_l) W2_l (bf16)."""
    lines = [*HEADER("stack"), "ranks:", f"  B: {b}",
             f"  D: {d}", f"  H: {h}", "tensors:", "- {name: x0, ranks: [B, D], dtype: bf16, role: input}"]
    nodes = ["nodes:"]
    for i in range(layers):
        last = i == layers - 1
        lines += [f"- {{name: w1_{i}, ranks: [D, H], dtype: bf16, role: weight}}",
                  f"- {{name: w2_{i}, ranks: [H, D], dtype: bf16, role: weight}}",
                  f"- {{name: h{i}, ranks: [B, H], dtype: bf16, role: intermediate}}",
                  f"- {{name: a{i}, ranks: [B, H], dtype: bf16, role: intermediate}}",
                  f"- {{name: z{i}, ranks: [B, D], dtype: bf16, role: intermediate}}",
                  f"- {{name: x{i + 1}, ranks: [B, D], dtype: bf16, role: {'output' if last else 'intermediate'}}}"]
        nodes += [f"- {{name: fc1_{i}, kind: einsum, op: mm, space: [B, H, D], inputs: ['x{i}[B, D]', "
                  f"'w1_{i}[D, H]'], output: 'h{i}[B, H]', map: mul, reduce: add}}",
                  f"- {{name: relu{i}, kind: einsum, op: relu, space: [B, H], inputs: ['h{i}[B, H]'], "
                  f"output: 'a{i}[B, H]', map: relu, reduce: none}}",
                  f"- {{name: fc2_{i}, kind: einsum, op: mm, space: [B, D, H], inputs: ['a{i}[B, H]', "
                  f"'w2_{i}[H, D]'], output: 'z{i}[B, D]', map: mul, reduce: add}}",
                  f"- {{name: res{i}, kind: einsum, op: add, space: [B, D], inputs: ['x{i}[B, D]', 'z{i}[B, D]'], "
                  f"output: 'x{i + 1}[B, D]', map: add, reduce: none}}"]
    return solar_io.loads("\n".join(lines + nodes + TAIL) + "\n")


def moe(t: int = 16, d: int = 32, x: int = 4, c: int = 8, f: int = 64) -> solar_io.Graph:
    """A GShard-style MoE layer with a fixed routing: ``disp[X, C, T]`` places tokens in expert slots,
    two batched expert linears ``w1[X, D, F]``, ``w2[X, F, D]`` run every expert on its ``C`` slots,
    ``comb[T, X, C]`` weighs the results back into the tokens (bf16)."""
    text = [*HEADER("moe"), "ranks:", f"  T: {t}", f"  D: {d}", f"  X: {x}", f"  C: {c}", f"  F: {f}", "tensors:",
            "- {name: x, ranks: [T, D], dtype: bf16, role: input}",
            "- {name: disp, ranks: [X, C, T], dtype: bf16, role: input}",
            "- {name: comb, ranks: [T, X, C], dtype: bf16, role: input}",
            "- {name: w1, ranks: [X, D, F], dtype: bf16, role: weight}",
            "- {name: w2, ranks: [X, F, D], dtype: bf16, role: weight}",
            "- {name: buf, ranks: [X, C, D], dtype: bf16, role: intermediate}",
            "- {name: h, ranks: [X, C, F], dtype: bf16, role: intermediate}",
            "- {name: a, ranks: [X, C, F], dtype: bf16, role: intermediate}",
            "- {name: y, ranks: [X, C, D], dtype: bf16, role: intermediate}",
            "- {name: out, ranks: [T, D], dtype: bf16, role: output}",
            "nodes:",
            "- {name: dispatch, kind: einsum, op: einsum, space: [X, C, D, T], inputs: ['disp[X, C, T]', 'x[T, D]'], "
            "output: 'buf[X, C, D]', map: mul, reduce: add}",
            "- {name: e1, kind: einsum, op: bmm, space: [X, C, F, D], inputs: ['buf[X, C, D]', 'w1[X, D, F]'], "
            "output: 'h[X, C, F]', map: mul, reduce: add}",
            "- {name: act, kind: einsum, op: gelu, space: [X, C, F], inputs: ['h[X, C, F]'], output: 'a[X, C, F]', "
            "map: gelu, reduce: none}",
            "- {name: e2, kind: einsum, op: bmm, space: [X, C, D, F], inputs: ['a[X, C, F]', 'w2[X, F, D]'], "
            "output: 'y[X, C, D]', map: mul, reduce: add}",
            "- {name: combine, kind: einsum, op: einsum, space: [T, D, X, C], inputs: ['comb[T, X, C]', "
            "'y[X, C, D]'], output: 'out[T, D]', map: mul, reduce: add}"]
    return solar_io.loads("\n".join(text + TAIL) + "\n")


def train_linear(b: int = 8, d: int = 4096, h: int = 4096) -> solar_io.Graph:
    """One training step of y = x W by hand: forward, the weight gradient dW = x^T dy (dy given, the loss's
    gradient), an SGD update W' = W - lr dW; phases marked (format 1.3)."""
    text = [*HEADER("train_linear", "1.3"), "ranks:", f"  B: {b}", f"  D: {d}", f"  H: {h}", "tensors:",
            "- {name: x, ranks: [B, D], dtype: bf16, role: input}",
            "- {name: dy, ranks: [B, H], dtype: bf16, role: input}",
            "- {name: w, ranks: [D, H], dtype: bf16, role: weight}",
            "- {name: lr, ranks: [], dtype: bf16, role: constant, value: 0.01}",
            "- {name: y, ranks: [B, H], dtype: bf16, role: output}",
            "- {name: dw, ranks: [D, H], dtype: bf16, role: intermediate}",
            "- {name: step, ranks: [D, H], dtype: bf16, role: intermediate}",
            "- {name: w_new, ranks: [D, H], dtype: bf16, role: output}",
            "nodes:",
            "- {name: fwd, kind: einsum, op: mm, phase: forward, space: [B, H, D], inputs: ['x[B, D]', 'w[D, H]'], "
            "output: 'y[B, H]', map: mul, reduce: add}",
            "- {name: grad_w, kind: einsum, op: mm, phase: backward, space: [D, H, B], inputs: ['x[B, D]', "
            "'dy[B, H]'], output: 'dw[D, H]', map: mul, reduce: add}",
            "- {name: scale, kind: einsum, op: mul, phase: optimizer, space: [D, H], inputs: ['dw[D, H]', 'lr[]'], "
            "output: 'step[D, H]', map: mul, reduce: none}",
            "- {name: update, kind: einsum, op: sub, phase: optimizer, space: [D, H], inputs: ['w[D, H]', "
            "'step[D, H]'], output: 'w_new[D, H]', map: sub, reduce: none}"]
    return solar_io.loads("\n".join(text + TAIL) + "\n")


def moe_dense(t: int = 16, d: int = 32, x: int = 4, f: int = 64) -> solar_io.Graph:
    """Every expert on every token (``tests/models/moe_topk.py``'s form): ``h[T, X, F] = x[T, D] w1[X, D, F]``,
    ``y[T, X, D] = gelu(h) w2[X, F, D]``, ``out[T, D] = sum_X gate[T, X] y[T, X, D]`` (bf16)."""
    text = [*HEADER("moe_dense"), "ranks:", f"  T: {t}", f"  D: {d}", f"  X: {x}", f"  F: {f}", "tensors:",
            "- {name: x, ranks: [T, D], dtype: bf16, role: input}",
            "- {name: gate, ranks: [T, X], dtype: bf16, role: input}",
            "- {name: w1, ranks: [X, D, F], dtype: bf16, role: weight}",
            "- {name: w2, ranks: [X, F, D], dtype: bf16, role: weight}",
            "- {name: h, ranks: [T, X, F], dtype: bf16, role: intermediate}",
            "- {name: a, ranks: [T, X, F], dtype: bf16, role: intermediate}",
            "- {name: y, ranks: [T, X, D], dtype: bf16, role: intermediate}",
            "- {name: out, ranks: [T, D], dtype: bf16, role: output}",
            "nodes:",
            "- {name: e1, kind: einsum, op: einsum, space: [T, X, F, D], inputs: ['x[T, D]', 'w1[X, D, F]'], "
            "output: 'h[T, X, F]', map: mul, reduce: add}",
            "- {name: act, kind: einsum, op: gelu, space: [T, X, F], inputs: ['h[T, X, F]'], output: 'a[T, X, F]', "
            "map: gelu, reduce: none}",
            "- {name: e2, kind: einsum, op: einsum, space: [T, X, D, F], inputs: ['a[T, X, F]', 'w2[X, F, D]'], "
            "output: 'y[T, X, D]', map: mul, reduce: add}",
            "- {name: combine, kind: einsum, op: einsum, space: [T, D, X], inputs: ['gate[T, X]', 'y[T, X, D]'], "
            "output: 'out[T, D]', map: mul, reduce: add}"]
    return solar_io.loads("\n".join(text + TAIL) + "\n")


def train_two(b: int = 64, d: int = 1024) -> solar_io.Graph:
    """A training step of two linear layers by hand (phases marked): y1 = x w1, y2 = y1 w2; given dy2, the
    backward dw2 = y1^T dy2, dy1 = dy2 w2^T, dw1 = x^T dy1; SGD w' = w - lr dw (bf16)."""
    def t(n: str, r: str, role: str = "intermediate") -> str:
        return f"- {{name: {n}, ranks: [{r}], dtype: bf16, role: {role}}}"

    def e(n: str, ph: str, sp: str, ins: str, out: str, mp: str = "mul", rd: str = "add") -> str:
        return (f"- {{name: {n}, kind: einsum, op: {n}, phase: {ph}, space: [{sp}], inputs: {ins}, "
                f"output: '{out}', map: {mp}, reduce: {rd}}}")

    text = [*HEADER("train_two", "1.3"), "ranks:", f"  B: {b}", f"  D: {d}", f"  E: {d}", f"  F: {d}", "tensors:",
            t("x", "B, D", "input"), t("dy2", "B, F", "input"), t("w1", "D, E", "weight"), t("w2", "E, F", "weight"),
            "- {name: lr, ranks: [], dtype: bf16, role: constant, value: 0.01}",
            t("y1", "B, E"), t("y2", "B, F", "output"), t("dw2", "E, F"), t("dy1", "B, E"), t("dw1", "D, E"),
            t("s1", "D, E"), t("s2", "E, F"), t("w1n", "D, E", "output"), t("w2n", "E, F", "output"), "nodes:",
            e("fwd1", "forward", "B, E, D", "['x[B, D]', 'w1[D, E]']", "y1[B, E]"),
            e("fwd2", "forward", "B, F, E", "['y1[B, E]', 'w2[E, F]']", "y2[B, F]"),
            e("dw2_", "backward", "E, F, B", "['y1[B, E]', 'dy2[B, F]']", "dw2[E, F]"),
            e("dy1_", "backward", "B, E, F", "['dy2[B, F]', 'w2[E, F]']", "dy1[B, E]"),
            e("dw1_", "backward", "D, E, B", "['x[B, D]', 'dy1[B, E]']", "dw1[D, E]"),
            e("s1_", "optimizer", "D, E", "['dw1[D, E]', 'lr[]']", "s1[D, E]", rd="none"),
            e("u1", "optimizer", "D, E", "['w1[D, E]', 's1[D, E]']", "w1n[D, E]", mp="sub", rd="none"),
            e("s2_", "optimizer", "E, F", "['dw2[E, F]', 'lr[]']", "s2[E, F]", rd="none"),
            e("u2", "optimizer", "E, F", "['w2[E, F]', 's2[E, F]']", "w2n[E, F]", mp="sub", rd="none")]
    return solar_io.loads("\n".join(text + TAIL) + "\n")


def moe_loop(tokens: tuple[int, ...] = (3, 5, 2, 6), t: int = 16, d: int = 32, f: int = 64) -> solar_io.Graph:
    """Experts as separate modules (transformers' Mixtral pattern) with a fixed routing: expert i gathers its
    ``tokens[i]`` rows ``x[@idx_i, D]``, runs ``relu(xe_i w1_i) w2_i`` and ``comb_i[T, N_i]`` adds the results
    back into the tokens (bf16)."""
    ranks = ["ranks:", f"  T: {t}", f"  D: {d}", f"  F: {f}"] + [f"  N{i}: {n}" for i, n in enumerate(tokens)]
    ten = ["tensors:", "- {name: x, ranks: [T, D], dtype: bf16, role: input}"]
    nodes = ["nodes:"]
    for i, _ in enumerate(tokens):
        n = f"N{i}"
        ten += [f"- {{name: idx{i}, ranks: [{n}], dtype: int32, role: input}}",
                f"- {{name: comb{i}, ranks: [T, {n}], dtype: bf16, role: input}}",
                f"- {{name: w1_{i}, ranks: [D, F], dtype: bf16, role: weight}}",
                f"- {{name: w2_{i}, ranks: [F, D], dtype: bf16, role: weight}}"]
        ten += [f"- {{name: {v}{i}, ranks: [{r}], dtype: bf16, role: intermediate}}"
                for v, r in (("xe", f"{n}, D"), ("h", f"{n}, F"), ("a", f"{n}, F"), ("y", f"{n}, D"), ("c", "T, D"))]
        nodes += [f"- {{name: gather{i}, kind: data_movement, op: index_select, movement: copy, space: [{n}, D], "
                  f"inputs: ['x[@idx{i}, D]', 'idx{i}[{n}]'], output: 'xe{i}[{n}, D]'}}",
                  f"- {{name: up{i}, kind: einsum, op: mm, space: [{n}, F, D], inputs: ['xe{i}[{n}, D]', "
                  f"'w1_{i}[D, F]'], output: 'h{i}[{n}, F]', map: mul, reduce: add}}",
                  f"- {{name: relu{i}, kind: einsum, op: relu, space: [{n}, F], inputs: ['h{i}[{n}, F]'], "
                  f"output: 'a{i}[{n}, F]', map: relu, reduce: none}}",
                  f"- {{name: down{i}, kind: einsum, op: mm, space: [{n}, D, F], inputs: ['a{i}[{n}, F]', "
                  f"'w2_{i}[F, D]'], output: 'y{i}[{n}, D]', map: mul, reduce: add}}",
                  f"- {{name: back{i}, kind: einsum, op: mm, space: [T, D, {n}], inputs: ['comb{i}[T, {n}]', "
                  f"'y{i}[{n}, D]'], output: 'c{i}[T, D]', map: mul, reduce: add}}"]
    acc = "c0"
    for i in range(1, len(tokens)):
        name = "out" if i == len(tokens) - 1 else f"s{i}"
        role = "output" if name == "out" else "intermediate"
        ten.append(f"- {{name: {name}, ranks: [T, D], dtype: bf16, role: {role}}}")
        nodes.append(f"- {{name: add{i}, kind: einsum, op: add, space: [T, D], inputs: ['{acc}[T, D]', 'c{i}[T, D]'], "
                     f"output: '{name}[T, D]', map: add, reduce: none}}")
        acc = name
    return solar_io.loads("\n".join([*HEADER("moe_loop"), *ranks, *ten, *nodes, *TAIL]) + "\n")
