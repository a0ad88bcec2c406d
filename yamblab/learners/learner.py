"""The learner: the trained network, its EMA copy, the optimiser and the training step.

The Ray runtime wraps this class: it calls :meth:`Learner.train_iteration` on samples drawn
from the replay buffer (as many as the replay ratio asks for) and ships :meth:`Learner.get_weights` (the EMA network's weights with a
version number) to self-play workers, which load them with
:meth:`yamblab.learners.selfplay.SelfPlay.set_weights` only when the version changed.
"""

from __future__ import annotations

import os
import shutil
import time

import numpy as np
import torch

from yamblab.errors import ConfigError
from yamblab.learners.config import TrainConfig
from yamblab.learners.ema import EMA
from yamblab.learners.health import activation_health, grad_norms
from yamblab.learners.losses import compute_losses
from yamblab.learners.samples import SampleBatch
from yamblab.model.config import ModelConfig
from yamblab.model.network import YambNet, autocast


class Learner:
    """Trains a :class:`~yamblab.model.network.YambNet` on self-play samples.

    Args:
        model_cfg, train_cfg: configuration.
        net: an existing network to train (default: a fresh one seeded by ``train_cfg.seed``).
        device: ``"cpu"`` or ``"cuda"``.
        compile: run the transformer's part of every training step (forward and backward)
            through ``torch.compile`` (``runtime.learner_compile``; see
            :func:`compiled_transformer`).
        bf16: forward passes and losses under bf16 autocast on a CUDA device
            (``runtime.bf16``; the value heads stay float32); nothing changes on a CPU.

    Raises:
        ConfigError: ``compile`` on a CPU with no C++ compiler (:func:`check_compile_toolchain`).

    Attributes:
        net: the trained network; ema: its :class:`~yamblab.learners.ema.EMA` (the player);
        optimizer: AdamW; steps: optimiser steps so far (also the weights' version);
        iteration: calls of :meth:`train_iteration` so far.
    """

    def __init__(self, model_cfg: ModelConfig, train_cfg: TrainConfig, net: YambNet | None = None,
                 device: str = "cpu", compile: bool = False, bf16: bool = False):
        self.model_cfg = model_cfg
        self.cfg = train_cfg
        self.device = torch.device(device)
        self.bf16 = bool(bf16)
        if net is None:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(train_cfg.seed)
                net = YambNet(model_cfg)
        self.net = net.to(self.device).train()
        self.ema = EMA(self.net, train_cfg.ema_decay, warmup=train_cfg.ema_warmup)
        # One fused kernel for every parameter (CPU and GPU) instead of a loop per parameter.
        self.optimizer = torch.optim.AdamW(self.net.parameters(), lr=train_cfg.lr,
                                           weight_decay=train_cfg.weight_decay, fused=True)
        #: the transformer pass the training steps use: ``None`` (eager) or its compiled form
        self.transformer = compiled_transformer(self.net) if compile else None
        self.steps = 0
        self.iteration = 0
        self.samples_trained = 0
        self.rng = np.random.default_rng([train_cfg.seed, 0x1EA2])

    # ------------------------------------------------------------------ weights
    @property
    def version(self) -> int:
        """Version of the playing weights: the number of optimiser steps so far."""
        return self.steps

    def start_from(self, weights: dict, source: str = "the checkpoint") -> list[str]:
        """Start from a trained network's weights (a warm start): the trained network and its
        EMA both take them (:func:`~yamblab.model.checkpoint.transfer_weights`: a wider boundary
        head keeps what the narrower one computed); the optimiser, step count and minibatch
        order stay a new learner's.

        Returns:
            the names of the widened weights.

        Raises:
            ConfigError: weights of another network (see ``transfer_weights``).
        """
        from yamblab.model.checkpoint import transfer_weights

        widened = transfer_weights(self.net, {k: v.to(self.device) for k, v in weights.items()}, source)
        self.ema.model.load_state_dict(self.net.state_dict(), strict=True)
        return widened

    def get_weights(self) -> tuple[int, dict[str, torch.Tensor]]:
        """``(version, state_dict)`` of the EMA (playing) network, tensors on the CPU."""
        return self.version, {k: v.detach().cpu().clone() for k, v in self.ema.model.state_dict().items()}

    # ------------------------------------------------------------------ training
    def _step(self, x, t) -> dict[str, float]:
        cfg = self.cfg
        with autocast(self.device, self.bf16):
            out = self.net(x, transformer=self.transformer)
            losses = compute_losses(out, x, t, cfg, self.net.bin_centers, self.model_cfg.value_max)
        loss = losses["total"]
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        gn = grad_norms(self.net)
        torch.nn.utils.clip_grad_norm_(self.net.parameters(), cfg.grad_clip)
        self.optimizer.step()
        self.ema.update(self.net)          # after EVERY optimiser step (the YoloYamb post)
        self.steps += 1
        # compute_losses leaves out a term with no position in this batch, so the step means
        # average each term over the steps that trained it (split steps).
        m = {k: float(v.detach()) for k, v in losses.items()}
        m.update(gn)
        return m

    def set_lr(self, lr: float) -> None:
        """Set the optimiser's learning rate (the runtime's schedule, :meth:`TrainConfig.lr_at`).

        Raises:
            ValueError: ``lr`` is not a finite positive number.
        """
        if not (np.isfinite(lr) and lr > 0):
            raise ValueError(f"learning rate must be a finite positive number, got {lr!r}")
        for g in self.optimizer.param_groups:
            g["lr"] = float(lr)

    def train_iteration(self, samples: SampleBatch, health: bool = True, lr: float | None = None) -> dict[str, float]:
        """One pass over ``samples`` in optimiser steps of ``batch_size`` positions, at learning
        rate ``lr`` when given (else the optimiser's current one).

        The runtime draws ``TrainConfig.samples_for(new positions)`` samples uniformly from the
        replay buffer, so one pass makes the configured replay ratio.

        Returns:
            mean metrics over the optimiser steps (``total``, ``policy``, ``value``,
            ``entropy``, ``aux_*``, ``grad_norm*``), plus ``steps``, ``version``, ``lr``,
            ``ema_updates``, ``samples`` (positions trained on in this call), ``seconds`` and
            (with ``health``) the activation health metrics.

        Raises:
            ValueError: an empty sample batch.
        """
        if len(samples) == 0:
            raise ValueError("cannot train on an empty sample batch")
        if lr is not None:
            self.set_lr(lr)
        t0 = time.perf_counter()
        cfg = self.cfg
        self.net.train()
        x_all, t_all = samples.to_torch(self.device)
        n = len(samples)
        bs = min(cfg.batch_size, n)
        acc: dict[str, list[float]] = {}
        trained = 0

        if cfg.decision_batch_size is not None and self.net.boundary_head is not None:
            batches = self._split_batches(x_all.dice[:, 0] != 0)
        else:           # one pass in a random order
            perm = torch.as_tensor(self.rng.permutation(n), device=self.device)
            batches = [perm[s:s + bs] for s in range(0, n - bs + 1, bs)]
        for idx in batches:
            m = self._step(x_all[idx], {k: v[idx] for k, v in t_all.items()})
            trained += len(idx)
            for k, v in m.items():
                acc.setdefault(k, []).append(v)
        self.iteration += 1
        self.samples_trained += trained
        metrics = {k: float(np.mean(v)) for k, v in acc.items()}
        metrics.update(steps=float(self.steps), version=float(self.version),
                       lr=float(self.optimizer.param_groups[0]["lr"]),
                       ema_updates=float(self.ema.updates), samples=float(trained),
                       samples_total=float(self.samples_trained), seconds=time.perf_counter() - t0)
        if health:
            k = min(n, 512)
            metrics.update(activation_health(self.net, x_all[torch.arange(k, device=self.device)]))
        return metrics

    def _split_batches(self, with_dice: torch.Tensor) -> list[torch.Tensor]:
        """``train.decision_batch_size``: the sample's rows without dice in shuffled batches of
        ``batch_size`` (boundary-head steps) and its rows with dice in batches of
        ``decision_batch_size`` (transformer steps), the two kinds interleaved evenly.

        Args:
            with_dice: bool (N,), True where a position has dice on the table.

        Returns:
            index tensors int64, one per optimiser step; a remainder smaller than a full batch
            is left out (as with mixed batches), unless it is all there is of its kind.
        """
        out = []
        for rows, size in ((~with_dice, self.cfg.batch_size), (with_dice, self.cfg.decision_batch_size)):
            idx = rows.nonzero(as_tuple=True)[0]
            m = len(idx)
            if m == 0:
                out.append([])
                continue
            idx = idx[torch.as_tensor(self.rng.permutation(m), device=idx.device)]
            size = min(size, m)
            out.append([idx[s:s + size] for s in range(0, m - size + 1, size)])
        boundary, decisions = out
        # Interleave: the k-th of D decision steps follows boundary step ⌊k·B/D⌋.
        steps, nb, nd = [], len(boundary), len(decisions)
        j = 0
        for i, b in enumerate(boundary):
            steps.append(b)
            while j < nd and (j + 1) * nb <= (i + 1) * nd:
                steps.append(decisions[j])
                j += 1
        steps.extend(decisions[j:])
        return steps

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict:
        """Everything a checkpoint needs (plain types and tensors), the minibatch generator's
        state included, so that a resumed run draws the minibatches an unbroken run draws."""
        return {
            "model_config": self.model_cfg.model_dump(),
            "train_config": self.cfg.model_dump(),
            "model": self.net.state_dict(),
            "ema": self.ema.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "steps": self.steps,
            "iteration": self.iteration,
            "ema_updates": self.ema.updates,
            "samples_trained": self.samples_trained,
            "rng": self.rng.bit_generator.state,
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore from :meth:`state_dict` (strict: every weight must be present).

        Raises:
            RuntimeError: missing or unexpected weights.
        """
        self.net.load_state_dict(state["model"], strict=True)
        self.ema.model.load_state_dict(state["ema"], strict=True)
        self.optimizer.load_state_dict(state["optimizer"])
        self.steps = int(state["steps"])
        self.iteration = int(state["iteration"])
        self.ema.updates = int(state.get("ema_updates", 0))
        self.samples_trained = int(state.get("samples_trained", 0))
        if state.get("rng"):      # the minibatch order carries on (older checkpoints: reseeded)
            self.rng.bit_generator.state = state["rng"]


def check_compile_toolchain(device: str = "cpu") -> None:
    """Refuse ``runtime.learner_compile`` where ``torch.compile`` cannot build its kernels.

    On a CPU, inductor compiles C++ (the compiler in ``CXX``, else ``g++``, ``clang++`` or
    ``c++`` on the ``PATH``); on a GPU it writes Triton kernels, which CUDA builds of PyTorch
    carry, so nothing is checked there.

    Raises:
        ConfigError: a CPU device and no C++ compiler found.
    """
    if str(device).startswith("cuda"):
        return
    names = [os.environ["CXX"]] if os.environ.get("CXX") else ["g++", "clang++", "c++"]
    if not any(shutil.which(n) for n in names):
        raise ConfigError("runtime.learner_compile needs a C++ compiler for torch.compile on a CPU, and "
                          f"none was found ({' / '.join(names)}): install one (Debian: apt-get install g++) "
                          "or set runtime.learner_compile: false")


def compiled_transformer(net: YambNet):
    """``net.transformer_pass`` through ``torch.compile`` (inductor, dynamic batch size), for
    :meth:`YambNet.forward`'s ``transformer`` argument.

    The tiny network's transformer is many small operations on a few dozen rows a step, so on
    a CPU its cost is mostly per-operation overhead, which compiled kernels fuse away
    (``benchmarks/learner_compile.py`` measures the step). The first step compiles (a minute
    or so on a small CPU; a later run on the same machine reuses inductor's cache), and a batch of fewer than 2 rows runs eagerly, so that dynamic shapes never specialise on
    size 0 or 1 and compile again. Results agree with the eager pass to float rounding, not bit
    for bit.

    Raises:
        ConfigError: on a CPU with no C++ compiler (:func:`check_compile_toolchain`).
    """
    check_compile_toolchain(str(net.device))
    fn = torch.compile(net.transformer_pass, dynamic=True)
    eager = net.transformer_pass

    def transformer(x):
        return fn(x) if len(x) >= 2 else eager(x)

    return transformer
