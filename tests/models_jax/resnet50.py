"""ResNet-50 (v1.5: stride in the 3x3 conv) in Flax linen, NHWC, batch norm with running statistics.

The architecture is the standard one (stages of 3, 4, 6, 3 bottlenecks, widths 64..512,
expansion 4, 1000 classes); the test runs it at a small spatial size, the benchmark at 224.
"""

import flax.linen as nn
import jax
import numpy as np

STAGES = (3, 4, 6, 3)
BATCH, SIZE, CLASSES = 1, 32, 1000


class Bottleneck(nn.Module):
    width: int
    stride: int
    project: bool

    @nn.compact
    def __call__(self, x):
        norm = lambda: nn.BatchNorm(use_running_average=True)  # noqa: E731
        y = nn.relu(norm()(nn.Conv(self.width, (1, 1), use_bias=False)(x)))
        y = nn.relu(norm()(nn.Conv(self.width, (3, 3), (self.stride, self.stride), padding=((1, 1), (1, 1)),
                                   use_bias=False)(y)))
        y = norm()(nn.Conv(4 * self.width, (1, 1), use_bias=False)(y))
        if self.project:
            x = norm()(nn.Conv(4 * self.width, (1, 1), (self.stride, self.stride), use_bias=False)(x))
        return nn.relu(y + x)


class Model(nn.Module):
    classes: int = CLASSES

    @nn.compact
    def __call__(self, x):
        x = nn.Conv(64, (7, 7), (2, 2), padding=((3, 3), (3, 3)), use_bias=False)(x)
        x = nn.relu(nn.BatchNorm(use_running_average=True)(x))
        x = nn.max_pool(x, (3, 3), (2, 2), padding=((1, 1), (1, 1)))
        for i, blocks in enumerate(STAGES):
            for b in range(blocks):
                stride = 2 if i > 0 and b == 0 else 1
                x = Bottleneck(64 * 2 ** i, stride, b == 0)(x)
        return nn.Dense(self.classes)(x.mean(axis=(1, 2)))


def get_init_inputs():
    return (CLASSES,)


def get_params():
    """Validation parameters without ``Model.init`` (whose truncated-normal RNG takes tens of
    seconds to compile on CPU): the init's tree, He-scaled normal kernels, batch norm at its
    initial statistics (mean 0, variance 1, scale 1, bias 0)."""
    rng = np.random.default_rng(0)
    shapes = jax.eval_shape(Model().init, jax.random.PRNGKey(0), jax.ShapeDtypeStruct((1, SIZE, SIZE, 3), "float32"))

    def leaf(path, s):
        name = str(path[-1].key)
        if name == "kernel":
            fan_in = int(np.prod(s.shape[:-1]))
            return (rng.standard_normal(s.shape) * np.sqrt(2.0 / fan_in)).astype(s.dtype)
        return np.ones(s.shape, s.dtype) if name in ("var", "scale") else np.zeros(s.shape, s.dtype)

    return jax.tree_util.tree_map_with_path(leaf, shapes)


def get_inputs():
    return (np.random.default_rng(34).standard_normal((BATCH, SIZE, SIZE, 3), dtype=np.float32),)
