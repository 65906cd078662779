"""LoRA adapters' GPU slots and host-memory cache (vLLM's LRUCacheWorkerLoRAManager): a batch's adapters
must be in GPU slots (max_loras of them) before it runs; one not there is copied in from host memory,
evicting the least recently used slot, and read from disk first when the host cache (max_cpu_loras) does not
hold it either. The copies happen before the forward pass (_set_active_loras), so they add to the step."""

from __future__ import annotations

from collections import OrderedDict


class LoraSlots:
    """Adapter ids in GPU slots and in host memory, least recently used first."""

    def __init__(self, gpu_slots: int, cpu_slots: int, h2d_s: float, read_s: float) -> None:
        self.gpu: OrderedDict[int, None] = OrderedDict()
        self.cpu: OrderedDict[int, None] = OrderedDict()
        self.gpu_slots, self.cpu_slots, self.h2d_s, self.read_s = gpu_slots, cpu_slots, h2d_s, read_s
        self.loads = 0
        self.reads = 0

    def load_s(self, adapters: set[int]) -> float:
        """Seconds to bring the batch's adapters (at most gpu_slots of them) into GPU slots."""
        seconds = 0.0
        for adapter in sorted(adapters):
            if adapter in self.gpu:
                self.gpu.move_to_end(adapter)
                continue
            if adapter not in self.cpu:
                seconds += self.read_s
                self.reads += 1
                self.cpu[adapter] = None
                if len(self.cpu) > self.cpu_slots:
                    self.cpu.popitem(last=False)
            self.cpu.move_to_end(adapter)
            seconds += self.h2d_s
            self.loads += 1
            self.gpu[adapter] = None
            if len(self.gpu) > self.gpu_slots:
                self.gpu.popitem(last=False)
        return seconds
