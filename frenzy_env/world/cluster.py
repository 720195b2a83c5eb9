"""GPU catalogue, cluster specifications and presets, and the mutable cluster state.

A cluster is a tuple of nodes; every node holds GPUs of one type. :class:`ClusterState` keeps, on numpy
arrays, how many GPUs of each node are free and which job owns each GPU, and refuses double booking.

Numbers in the catalogue come from the vendors' datasheets and whitepapers (cited beside each entry).
Peak throughput is the dense (no sparsity) FP16/BF16 tensor figure *with FP32 accumulate*, the rate that
mixed-precision training (FP16/BF16 inputs, FP32 accumulation, as PyTorch AMP and Megatron-LM run GEMMs)
can reach. Link bandwidths are GB/s (1e9 bytes/s) per direction: the intra-node link per GPU, the network
per node (all NICs of a node together, as in the server the type typically ships in).
Prices are indicative on-demand cloud prices per GPU-hour (late 2024) and only feed cost metrics.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from frenzy_env.errors import ConfigError, unknown_name

GiB = 1024**3


@dataclass(frozen=True)
class GPUType:
    """One GPU model.

    Attributes
    ----------
    name: catalogue name, e.g. ``"A100-80GB"``.
    memory_bytes: device memory in bytes.
    peak_tflops: dense FP16/BF16 tensor peak with FP32 accumulate (mixed-precision training), TFLOP/s.
    intra_node_gbps: GPU-to-GPU bandwidth inside a node, GB/s per direction per GPU (NVLink or PCIe).
    node_network_gbps: network bandwidth of one node, all its NICs together, GB/s per direction.
    cost_per_hour: indicative price of one GPU-hour, USD.
    source: where the numbers come from.
    nics_per_node: NICs the node's network bandwidth is spread over (each ``node_network_gbps /
        nics_per_node``); a GPU drives at most one NIC at a time, so a job holding ``k`` GPUs of a node
        reaches ``min(k, nics_per_node)`` NICs (:meth:`job_network_gbps`).
    """

    name: str
    memory_bytes: int
    peak_tflops: float
    intra_node_gbps: float
    node_network_gbps: float
    cost_per_hour: float
    source: str
    nics_per_node: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.nics_per_node, (int, np.integer)) or self.nics_per_node < 1:
            raise ConfigError(f"GPUType.nics_per_node must be a positive integer, got {self.nics_per_node!r}")
        for name in ("peak_tflops", "intra_node_gbps", "node_network_gbps"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value > 0):
                raise ConfigError(f"GPUType.{name} must be a positive number, got {value!r}")

    @property
    def nic_gbps(self) -> float:
        """Bandwidth of one NIC, GB/s per direction."""
        return self.node_network_gbps / self.nics_per_node

    def job_network_gbps(self, gpus_on_node: float | np.ndarray) -> float | np.ndarray:
        """Network bandwidth a job holding ``gpus_on_node`` GPUs of one node reaches, GB/s per direction.

        ``min(gpus_on_node, nics_per_node) * nic_gbps``: collective libraries (NCCL) spread a ring's
        inter-node traffic over one channel per GPU-NIC pair, so a whole DGX node gets all its NICs, one
        GPU of it one NIC, and any GPUs of a node with a single NIC the whole NIC.
        """
        k = np.minimum(np.asarray(gpus_on_node, dtype=np.float64), float(self.nics_per_node))
        out = k * self.nic_gbps
        return float(out) if np.ndim(out) == 0 else out


# fmt: off
_CATALOGUE = (
    # NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022), Table 3, H100 SXM5: 989.4 TFLOP/s dense
    # FP16 and BF16 tensor with FP32 accumulate (1978.9 with sparsity); 80 GB HBM3. Fourth-generation
    # NVLink: 18 links, 900 GB/s total = 450 GB/s per direction. DGX H100 user guide: 8 single-port
    # ConnectX-7 400 Gb/s InfiniBand NDR (OSFP) for the compute fabric, one per GPU: 8 x 50 = 400 GB/s.
    GPUType("H100-80GB", 80 * GiB, 989.0, 450.0, 400.0, 4.50,
            "NVIDIA H100 whitepaper (SXM5, FP16/BF16 w/ FP32 acc); NVLink 4; DGX H100 8x NDR 400 Gb/s",
            nics_per_node=8),
    # NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020), Table 1: 312 TFLOP/s dense FP16 and BF16
    # tensor with FP32 accumulate (624 with sparsity). Third-generation NVLink: 12 links, 600 GB/s total =
    # 300 GB/s per direction. DGX A100 system architecture (WP-10083): 8 single-port ConnectX-6 200 Gb/s
    # HDR InfiniBand for the cluster fabric, one per GPU: 8 x 25 = 200 GB/s per node.
    GPUType("A100-80GB", 80 * GiB, 312.0, 300.0, 200.0, 2.50,
            "NVIDIA A100 whitepaper (SXM4 80GB, FP16/BF16 w/ FP32 acc); NVLink 3; DGX A100 8x HDR 200 Gb/s",
            nics_per_node=8),
    GPUType("A100-40GB", 40 * GiB, 312.0, 300.0, 200.0, 2.00,
            "NVIDIA A100 whitepaper (SXM4 40GB, FP16/BF16 w/ FP32 acc); NVLink 3; DGX A100 8x HDR 200 Gb/s",
            nics_per_node=8),
    # NVIDIA Tesla V100 datasheet (SXM2) and Volta whitepaper: 125 TFLOP/s tensor (FP16 multiply, FP32
    # accumulate). Second-generation NVLink: 6 links x 25 GB/s per direction = 150 GB/s (300 GB/s total).
    # NVIDIA DGX-1 with Tesla V100 system architecture whitepaper (WP-08437-002): four 100 Gb/s EDR
    # InfiniBand NICs for 8 GPUs (one per PCIe switch of two GPUs): 4 x 12.5 = 50 GB/s per node.
    GPUType("V100-32GB", 32 * GiB, 125.0, 150.0, 50.0, 1.60,
            "NVIDIA V100 datasheet (SXM2 32GB, FP16 w/ FP32 acc); NVLink 2; DGX-1V 4x EDR 100 Gb/s per node",
            nics_per_node=4),
    GPUType("V100-16GB", 16 * GiB, 125.0, 150.0, 50.0, 1.20,
            "NVIDIA V100 datasheet (SXM2 16GB, FP16 w/ FP32 acc); NVLink 2; DGX-1V 4x EDR 100 Gb/s per node",
            nics_per_node=4),
    # NVIDIA Ampere GA102 GPU architecture whitepaper (v2.0), Appendix A, GeForce RTX 3090: 82 SMs x 4
    # third-generation tensor cores x 128 dense FP16 FMA/clock x 2 x 1.695 GHz boost = 142 TFLOP/s dense
    # FP16 tensor with FP16 accumulate (284 sparse); GeForce parts run FP32 accumulate at half rate: 71
    # TFLOP/s dense FP16/BF16 with FP32 accumulate (the mixed-precision figure used here; 35.6 is TF32).
    # PCIe 4.0 x16: 16 GT/s x 16 lanes x 128/130 = 31.5 GB/s per direction (GeForce has no NVLink switch;
    # the 2-way NVLink bridge is not assumed). Network: commodity servers with one 25 GbE port per node,
    # 3.125 GB/s for the node (not per GPU).
    GPUType("RTX3090-24GB", 24 * GiB, 71.0, 31.5, 3.125, 0.50,
            "NVIDIA GA102 whitepaper App. A (FP16 w/ FP32 acc); PCIe 4.0 x16; one 25 GbE per node",
            nics_per_node=1),
    # NVIDIA T4 datasheet: 65 TFLOP/s mixed precision (FP16 multiply, FP32 accumulate; Tesla parts run FP32
    # accumulate at full rate); PCIe 3.0 x16: 8 GT/s x 16 x 128/130 = 15.75 GB/s per direction. Network:
    # PAI's T4 machines hold 2 GPUs (pai_machine_spec.csv); their NICs are not published (Weng et al.,
    # NSDI 2022), so one 25 GbE port per node is assumed (the common data-centre Ethernet rate of 2020).
    GPUType("T4-16GB", 16 * GiB, 65.0, 15.75, 3.125, 0.35,
            "NVIDIA T4 datasheet (FP16 w/ FP32 acc); PCIe 3.0 x16; one 25 GbE per node (assumed)",
            nics_per_node=1),
    # NVIDIA Tesla P100 datasheet (PCIe 16GB): 18.7 TFLOP/s FP16, 9.3 TFLOP/s FP32. Pascal has no tensor
    # cores: its 2x FP16 rate is half2 arithmetic with FP16 accumulation; a GEMM with FP16 inputs and FP32
    # accumulation (mixed-precision training) runs on the FP32 units, 9.3 TFLOP/s. PCIe 3.0 x16 15.75 GB/s.
    # Network as for T4 (PAI 2-GPU machines, one 25 GbE port per node assumed).
    GPUType("P100-16GB", 16 * GiB, 9.3, 15.75, 3.125, 0.45,
            "NVIDIA Tesla P100 datasheet (PCIe 16GB, FP32 rate = FP16 w/ FP32 acc); PCIe 3.0 x16; "
            "one 25 GbE per node (assumed)",
            nics_per_node=1),
    # Types of the cloud-mixed preset (no other preset holds them). Prices: indicative, in the ratio of AWS EC2
    # on-demand list prices (us-east-1, 2024-25) per GPU to the p5.48xlarge's (8 x H100, $98.32/h), applied to
    # the H100's $4.50 above: p5e.48xlarge (8 x H200) $118.02/h, g6e.48xlarge (8 x L40S) $30.13/h,
    # g5.48xlarge (8 x A10G, the A10's cloud variant) $16.29/h.
    # NVIDIA H200 Tensor Core GPU datasheet (SXM): FP16 and BF16 tensor 1,979 TFLOP/s with sparsity = 989
    # dense (the H100's GH100 chip at the same clocks; data-centre parts run FP32 accumulate at full rate);
    # 141 GB HBM3e at 4.8 TB/s; fourth-generation NVLink 900 GB/s = 450 per direction. DGX H200 user guide:
    # 8 single-port ConnectX-7 400 Gb/s (NDR) compute NICs, one per GPU, as DGX H100: 8 x 50 = 400 GB/s.
    GPUType("H200-141GB", 141 * GiB, 989.0, 450.0, 400.0, 5.40,
            "NVIDIA H200 datasheet (SXM, FP16/BF16 1,979 sparse = 989 dense); NVLink 4; DGX H200 8x NDR 400 Gb/s",
            nics_per_node=8),
    # NVIDIA L40S datasheet: BF16 and FP16 tensor 362.05 TFLOP/s dense (733 with sparsity), 48 GB GDDR6 (ECC)
    # at 864 GB/s, PCIe Gen4 x16 (64 GB/s bidirectional: 16 GT/s x 16 x 128/130 = 31.5 GB/s per direction),
    # no NVLink. The datasheet does not name the accumulator; 362 is the full AD102 rate (142 SMs x 4 tensor
    # cores x 256 dense FP16 FLOP/clock x 2.52 GHz = 366), twice the L40's 181 on the same chip, so the L40S
    # is taken to run FP32 accumulate at full rate, as data-centre parts do (GeForce parts and the L40 halve
    # it). Node: 8 GPUs, as AWS's g6e.48xlarge (8 x L40S, 400 Gb/s network) and NVIDIA's PCIe-optimised
    # 2-8-5 server design (4 east-west NICs, one per GPU pair): 4 x 100 Gb/s = 50 GB/s per node (the split
    # over 4 NICs assumed).
    GPUType("L40S-48GB", 48 * GiB, 362.0, 31.5, 50.0, 1.40,
            "NVIDIA L40S datasheet (FP16/BF16 362 dense, FP32 acc assumed full rate); PCIe 4.0 x16; "
            "8-GPU node, 400 Gb/s as AWS g6e.48xlarge (4 NICs assumed)",
            nics_per_node=4),
    # NVIDIA A10 Tensor Core GPU datasheet: FP16 and BF16 tensor 125 TFLOP/s dense (250 with sparsity; GA102,
    # 72 SMs x 4 x 256 x 1.695 GHz = 125: the full rate, FP32 accumulate included, as the GA102 whitepaper's
    # data-centre A40), 24 GB GDDR6 at 600 GB/s, PCIe Gen4 x16 (31.5 GB/s per direction), 150 W, no NVLink
    # bridge assumed. Node: 4 GPUs, as Oracle Cloud's BM.GPU.A10.4 (4 x A10, 2 x 50 Gb/s network) and AWS's
    # g5.12xlarge/g5.24xlarge (4 x A10G): 2 x 50 Gb/s = 12.5 GB/s per node.
    GPUType("A10-24GB", 24 * GiB, 125.0, 31.5, 12.5, 0.75,
            "NVIDIA A10 datasheet (FP16/BF16 125 dense); PCIe 4.0 x16; 4-GPU node, 2 x 50 Gb/s as OCI BM.GPU.A10.4",
            nics_per_node=2),
)
# fmt: on

GPU_TYPES: dict[str, GPUType] = {g.name: g for g in _CATALOGUE}


def get_gpu_type(name: str | GPUType) -> GPUType:
    """Return the catalogue entry ``name`` (a :class:`GPUType` passes through)."""
    if isinstance(name, GPUType):
        return name
    try:
        return GPU_TYPES[name]
    except (KeyError, TypeError):
        raise unknown_name("GPU type", name, GPU_TYPES) from None


@dataclass(frozen=True)
class NodeSpec:
    """A node: ``num_gpus`` GPUs of one type."""

    gpu_type: str
    num_gpus: int

    def __post_init__(self) -> None:
        get_gpu_type(self.gpu_type)
        if not isinstance(self.num_gpus, (int, np.integer)) or self.num_gpus <= 0:
            raise ConfigError(f"NodeSpec.num_gpus must be a positive integer, got {self.num_gpus!r}")


# Alibaba PAI 2020 machine list (shared/data/clusters/pai_machine_spec.csv, CC BY 4.0; Weng et al.,
# "MLaaS in the Wild", NSDI 2022): machines and GPUs per machine of each known GPU type. The 280 "MISC"
# machines (unknown GPU model) and the 83 CPU machines are left out. Catalogue mapping: P100 -> P100-16GB,
# T4 -> T4-16GB, V100 -> V100-16GB, V100M32 -> V100-32GB.
PAI_2020_MACHINES: dict[str, tuple[int, int]] = {
    "P100-16GB": (798, 2),
    "T4-16GB": (497, 2),
    "V100-16GB": (104, 8),
    "V100-32GB": (135, 8),
}


@dataclass(frozen=True)
class ClusterSpec:
    """An immutable description of a cluster: its nodes and the GPU type trace durations refer to.

    Build one with :meth:`preset`, :meth:`homogeneous` or :meth:`from_counts`.
    """

    name: str
    nodes: tuple[NodeSpec, ...]
    reference_gpu_type: str = ""
    _cache: dict = field(default_factory=dict, compare=False, repr=False, hash=False)

    def __post_init__(self) -> None:
        if not self.nodes:
            raise ConfigError(f"cluster {self.name!r} has no nodes: a cluster needs at least one GPU")
        object.__setattr__(self, "nodes", tuple(self.nodes))
        if not self.reference_gpu_type:
            # the type with the most GPUs; ties: the larger memory
            counts: dict[str, int] = {}
            for n in self.nodes:
                counts[n.gpu_type] = counts.get(n.gpu_type, 0) + n.num_gpus
            ref = max(counts, key=lambda t: (counts[t], GPU_TYPES[t].memory_bytes))
            object.__setattr__(self, "reference_gpu_type", ref)
        get_gpu_type(self.reference_gpu_type)

    # ----------------------------------------------------------------- constructors
    @classmethod
    def homogeneous(cls, gpu_type: str, nodes: int, gpus_per_node: int, name: str | None = None) -> ClusterSpec:
        """``nodes`` nodes of ``gpus_per_node`` GPUs of ``gpu_type``."""
        get_gpu_type(gpu_type)
        if not isinstance(nodes, (int, np.integer)) or nodes <= 0:
            raise ConfigError(f"nodes must be a positive integer, got {nodes!r}")
        spec = NodeSpec(gpu_type, gpus_per_node)
        return cls(name or f"{gpu_type}x{nodes * gpus_per_node}", (spec,) * nodes, gpu_type)

    @classmethod
    def from_counts(
        cls, name: str, counts: dict[str, tuple[int, int]], reference_gpu_type: str = ""
    ) -> ClusterSpec:
        """Build from ``{gpu_type: (nodes, gpus_per_node)}``."""
        nodes: list[NodeSpec] = []
        for gpu_type, (n_nodes, per_node) in counts.items():
            if n_nodes < 0:
                raise ConfigError(f"node count of {gpu_type} must be >= 0, got {n_nodes}")
            nodes.extend(NodeSpec(gpu_type, per_node) for _ in range(n_nodes))
        return cls(name, tuple(nodes), reference_gpu_type)

    @classmethod
    def preset(cls, name: str) -> ClusterSpec:
        """A named preset; see :data:`CLUSTER_PRESETS`."""
        if isinstance(name, ClusterSpec):
            return name
        try:
            factory = CLUSTER_PRESETS[name]
        except (KeyError, TypeError):
            raise unknown_name("cluster preset", name, CLUSTER_PRESETS) from None
        return factory()

    # ----------------------------------------------------------------- derived views
    @cached_property
    def num_gpus(self) -> int:
        return int(sum(n.num_gpus for n in self.nodes))

    @property
    def num_nodes(self) -> int:
        return len(self.nodes)

    @cached_property
    def gpu_types(self) -> tuple[str, ...]:
        """Distinct GPU types, largest memory first (ties: higher peak, then name)."""
        names = {n.gpu_type for n in self.nodes}
        return tuple(
            sorted(names, key=lambda t: (-GPU_TYPES[t].memory_bytes, -GPU_TYPES[t].peak_tflops, t))
        )

    @cached_property
    def node_type_index(self) -> np.ndarray:
        """(num_nodes,) int64: index into :attr:`gpu_types` of each node."""
        index = {t: i for i, t in enumerate(self.gpu_types)}
        arr = np.array([index[n.gpu_type] for n in self.nodes], dtype=np.int64)
        arr.flags.writeable = False
        return arr

    @cached_property
    def node_capacity(self) -> np.ndarray:
        """(num_nodes,) int64: GPUs per node."""
        arr = np.array([n.num_gpus for n in self.nodes], dtype=np.int64)
        arr.flags.writeable = False
        return arr

    @cached_property
    def node_offsets(self) -> np.ndarray:
        """(num_nodes + 1,) int64: first global GPU index of each node (and the total at the end)."""
        arr = np.concatenate([[0], np.cumsum(self.node_capacity)]).astype(np.int64)
        arr.flags.writeable = False
        return arr

    @cached_property
    def type_capacity(self) -> np.ndarray:
        """(num_types,) int64: GPUs of each type."""
        arr = np.bincount(self.node_type_index, weights=self.node_capacity, minlength=len(self.gpu_types))
        return arr.astype(np.int64)

    def gpus_of_type(self, gpu_type: str) -> int:
        return int(self.type_capacity[self._type_pos(gpu_type)])

    def max_gpus_per_node(self, gpu_type: str) -> int:
        mask = self.node_type_index == self._type_pos(gpu_type)
        return int(self.node_capacity[mask].max())

    def _type_pos(self, gpu_type: str) -> int:
        try:
            return self.gpu_types.index(gpu_type)
        except ValueError:
            raise unknown_name(f"GPU type of cluster {self.name!r}", gpu_type, self.gpu_types) from None

    def describe(self) -> str:
        """One line per GPU type: ``A100-80GB: 4 nodes x 8 = 32 GPUs``."""
        lines = [f"{self.name}: {self.num_gpus} GPUs on {self.num_nodes} nodes"]
        for i, t in enumerate(self.gpu_types):
            caps = self.node_capacity[self.node_type_index == i]
            shape = ", ".join(f"{int((caps == c).sum())} x {int(c)}" for c in sorted(set(caps.tolist())))
            lines.append(f"  {t}: {shape} = {int(caps.sum())} GPUs")
        return "\n".join(lines)


def _frenzy_testbed() -> ClusterSpec:
    # Three GPU types, as in the Frenzy paper's heterogeneous testbed (the paper's exact machine counts
    # are not used): NVLink data-centre GPUs of two generations and PCIe consumer GPUs.
    return ClusterSpec.from_counts(
        "frenzy-testbed",
        {"A100-80GB": (4, 8), "V100-32GB": (4, 8), "RTX3090-24GB": (8, 4)},
        reference_gpu_type="A100-80GB",
    )


def _pai_2020(scale: float = 1 / 16) -> ClusterSpec:
    # PAI-2020 type mix (PAI_2020_MACHINES) scaled down by ``scale``, keeping each type's node shape.
    counts = {t: (max(1, round(m * scale)), g) for t, (m, g) in PAI_2020_MACHINES.items()}
    return ClusterSpec.from_counts("pai-2020", counts, reference_gpu_type="V100-32GB")


def _doubling_64() -> ClusterSpec:
    # The 64-GPU cluster of Capes et al. (arXiv 1908.08082): 8 nodes of 8 GPUs.
    return ClusterSpec.homogeneous("V100-32GB", 8, 8, name="doubling-64")


def _large_1024() -> ClusterSpec:
    return ClusterSpec.from_counts(
        "large-1024",
        {"H100-80GB": (32, 8), "A100-80GB": (48, 8), "A100-40GB": (24, 8), "V100-32GB": (24, 8)},
        reference_gpu_type="A100-80GB",
    )


def _cloud_mixed() -> ClusterSpec:
    """80 GPUs of three types no other preset holds, in the server shapes clouds rent them in.

    2 nodes x 8 H200-141GB (HGX/DGX H200 and AWS p5e.48xlarge hold 8, NVLink 4), 4 nodes x 8 L40S-48GB (AWS
    g6e.48xlarge and NVIDIA's PCIe-optimised 2-8-5 design hold 8; PCIe only) and 8 nodes x 4 A10-24GB (Oracle
    Cloud's BM.GPU.A10.4 and AWS g5.12xlarge hold 4; PCIe only): 16 + 32 + 32 GPUs on 14 nodes. One NVLink
    training type and two PCIe types, one of them 24 GB, so the mix differs from every other preset in speed,
    memory and links. Trace durations refer to the H200 (the data-centre training type, as the A100-80GB of
    frenzy-testbed).
    """
    return ClusterSpec.from_counts(
        "cloud-mixed",
        {"H200-141GB": (2, 8), "L40S-48GB": (4, 8), "A10-24GB": (8, 4)},
        reference_gpu_type="H200-141GB",
    )


CLUSTER_PRESETS = {
    "frenzy-testbed": _frenzy_testbed,
    "pai-2020": _pai_2020,
    "doubling-64": _doubling_64,
    "large-1024": _large_1024,
    "cloud-mixed": _cloud_mixed,
}


class ClusterState:
    """Which GPUs are free and which job holds each GPU.

    ``free`` (num_nodes,) counts free GPUs per node; ``owner`` (num_gpus,) holds the job id using each GPU
    or -1. Both are kept consistent by :meth:`allocate` and :meth:`release`, which refuse double booking.
    """

    def __init__(self, spec: ClusterSpec) -> None:
        self.spec = spec
        self.free = spec.node_capacity.astype(np.int64).copy()  # (num_nodes,)
        self.owner = np.full(spec.num_gpus, -1, dtype=np.int64)  # (num_gpus,)
        self._held: dict[int, np.ndarray] = {}  # job id -> global GPU indices held

    @property
    def num_free(self) -> int:
        return int(self.free.sum())

    def free_by_type(self) -> np.ndarray:
        """(num_types,) free GPUs per type."""
        return np.bincount(self.spec.node_type_index, weights=self.free, minlength=len(self.spec.gpu_types)).astype(
            np.int64
        )

    def holds(self, job_id: int) -> bool:
        return job_id in self._held

    def allocation(self, job_id: int) -> np.ndarray:
        """(num_nodes,) GPUs held by ``job_id`` on each node (zeros if none)."""
        counts = np.zeros(self.spec.num_nodes, dtype=np.int64)
        idx = self._held.get(job_id)
        if idx is not None:
            nodes = np.searchsorted(self.spec.node_offsets, idx, side="right") - 1
            np.add.at(counts, nodes, 1)
        return counts

    def allocate(self, job_id: int, counts: np.ndarray) -> np.ndarray:
        """Give ``job_id`` ``counts[i]`` GPUs on node ``i``; returns the global GPU indices taken.

        Raises ``ValueError`` if the job already holds GPUs, or a node has fewer free GPUs than asked.
        """
        counts = np.asarray(counts, dtype=np.int64)
        if counts.shape != self.free.shape:
            raise ValueError(f"counts must have shape {self.free.shape}, got {counts.shape}")
        if job_id in self._held:
            raise ValueError(f"job {job_id} already holds GPUs; release them before allocating again")
        if (counts < 0).any() or (counts > self.free).any():
            bad = int(np.flatnonzero((counts < 0) | (counts > self.free))[0])
            raise ValueError(
                f"cannot allocate {int(counts[bad])} GPUs on node {bad} to job {job_id}: {int(self.free[bad])} free"
            )
        taken = []
        offsets = self.spec.node_offsets
        for node in np.flatnonzero(counts):
            lo, hi = offsets[node], offsets[node + 1]
            free_idx = lo + np.flatnonzero(self.owner[lo:hi] < 0)[: counts[node]]
            taken.append(free_idx)
        idx = np.concatenate(taken) if taken else np.zeros(0, dtype=np.int64)
        if (self.owner[idx] >= 0).any():  # defensive: counts and owner disagree
            raise ValueError(f"double booking detected while allocating job {job_id}")
        self.owner[idx] = job_id
        self.free -= counts
        self._held[job_id] = idx
        return idx

    def release(self, job_id: int) -> np.ndarray:
        """Free every GPU of ``job_id``; returns (num_nodes,) counts released. Unknown job -> ValueError."""
        idx = self._held.pop(job_id, None)
        if idx is None:
            raise ValueError(f"job {job_id} holds no GPUs")
        counts = np.zeros(self.spec.num_nodes, dtype=np.int64)
        nodes = np.searchsorted(self.spec.node_offsets, idx, side="right") - 1
        np.add.at(counts, nodes, 1)
        self.owner[idx] = -1
        self.free += counts
        return counts

    def check(self) -> None:
        """Assert the internal invariants (used by tests and the fuzzer)."""
        cap = self.spec.node_capacity
        assert (self.free >= 0).all() and (self.free <= cap).all(), "free GPUs out of range"
        busy_per_node = np.add.reduceat((self.owner >= 0).astype(np.int64), self.spec.node_offsets[:-1])
        assert (busy_per_node == cap - self.free).all(), "free counts disagree with the owner array"
        held = sum(len(v) for v in self._held.values())
        assert held == int((self.owner >= 0).sum()), "a GPU is booked twice or leaked"
