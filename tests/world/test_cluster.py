"""Cluster catalogue, presets and ClusterState book-keeping."""

from __future__ import annotations

import numpy as np
import pytest

from frenzy_env.errors import ConfigError, UnknownNameError
from frenzy_env.world.cluster import GPU_TYPES, PAI_2020_MACHINES, ClusterSpec, ClusterState, get_gpu_type

REQUIRED = ("A100-80GB", "A100-40GB", "H100-80GB", "V100-32GB", "V100-16GB", "RTX3090-24GB", "T4-16GB", "P100-16GB")


def test_catalogue_has_required_types_with_sources():
    for name in REQUIRED:
        gpu = get_gpu_type(name)
        assert gpu.memory_bytes > 0 and gpu.peak_tflops > 0 and gpu.intra_node_gbps > 0
        assert gpu.source
    assert GPU_TYPES["A100-80GB"].memory_bytes == 80 * 1024**3
    assert GPU_TYPES["H100-80GB"].peak_tflops > GPU_TYPES["A100-80GB"].peak_tflops > GPU_TYPES["V100-32GB"].peak_tflops


def test_catalogue_peaks_and_networks_from_sources():
    # dense FP16/BF16 tensor with FP32 accumulate (mixed-precision training), TFLOP/s
    peaks = {"H100-80GB": 989.0, "A100-80GB": 312.0, "A100-40GB": 312.0, "V100-32GB": 125.0, "V100-16GB": 125.0,
             "RTX3090-24GB": 71.0, "T4-16GB": 65.0, "P100-16GB": 9.3}
    assert {n: GPU_TYPES[n].peak_tflops for n in peaks} == peaks
    # (NICs per node, node network GB/s): DGX H100 8 x NDR 400 Gb/s, DGX A100 8 x HDR 200 Gb/s,
    # DGX-1V 4 x EDR 100 Gb/s, one 25 GbE port per RTX 3090 / T4 / P100 node
    nets = {"H100-80GB": (8, 400.0), "A100-80GB": (8, 200.0), "A100-40GB": (8, 200.0), "V100-32GB": (4, 50.0),
            "V100-16GB": (4, 50.0), "RTX3090-24GB": (1, 3.125), "T4-16GB": (1, 3.125), "P100-16GB": (1, 3.125)}
    assert {n: (GPU_TYPES[n].nics_per_node, GPU_TYPES[n].node_network_gbps) for n in nets} == nets
    # intra-node links per direction: NVLink 4/3/2 = 450/300/150 GB/s, PCIe 4.0 / 3.0 x16 = 31.5 / 15.75
    intra = {"H100-80GB": 450.0, "A100-80GB": 300.0, "V100-32GB": 150.0, "RTX3090-24GB": 31.5, "T4-16GB": 15.75,
             "P100-16GB": 15.75}
    assert {n: GPU_TYPES[n].intra_node_gbps for n in intra} == intra
    for g in GPU_TYPES.values():
        assert g.nic_gbps * g.nics_per_node == pytest.approx(g.node_network_gbps)
        # a job reaches one NIC per GPU it holds on the node, at most all of them
        assert g.job_network_gbps(1) == pytest.approx(g.nic_gbps)
        assert g.job_network_gbps(64) == pytest.approx(g.node_network_gbps)
    rtx = GPU_TYPES["RTX3090-24GB"]
    assert rtx.job_network_gbps(1) == rtx.job_network_gbps(4) == 3.125  # 25 GbE per node, not per GPU


def test_gpu_type_rejects_bad_network():
    from frenzy_env.world.cluster import GPUType

    with pytest.raises(ConfigError, match="nics_per_node"):
        GPUType("x", 1, 1.0, 1.0, 1.0, 1.0, "t", nics_per_node=0)
    with pytest.raises(ConfigError, match="node_network_gbps"):
        GPUType("x", 1, 1.0, 1.0, 0.0, 1.0, "t")


def test_unknown_gpu_type_names_value_and_suggests():
    with pytest.raises(UnknownNameError, match="A100-80G.*did you mean 'A100-80GB'"):
        get_gpu_type("A100-80G")


def test_cloud_types_from_datasheets():
    """H200 (SXM, DGX H200), L40S and A10 (PCIe Gen4, no NVLink), as their datasheets and server shapes give them."""
    want = {  # name: (GiB, dense FP16/BF16 TFLOP/s with FP32 accumulate, intra GB/s, node GB/s, NICs)
        "H200-141GB": (141, 989.0, 450.0, 400.0, 8),
        "L40S-48GB": (48, 362.0, 31.5, 50.0, 4),
        "A10-24GB": (24, 125.0, 31.5, 12.5, 2),
    }
    got = {n: (GPU_TYPES[n].memory_bytes // 1024**3, GPU_TYPES[n].peak_tflops, GPU_TYPES[n].intra_node_gbps,
               GPU_TYPES[n].node_network_gbps, GPU_TYPES[n].nics_per_node) for n in want}
    assert got == want
    assert GPU_TYPES["H200-141GB"].peak_tflops == GPU_TYPES["H100-80GB"].peak_tflops  # the same GH100 chip
    assert GPU_TYPES["L40S-48GB"].job_network_gbps(1) == 12.5 and GPU_TYPES["L40S-48GB"].job_network_gbps(8) == 50.0
    for n in want:
        assert GPU_TYPES[n].source and GPU_TYPES[n].cost_per_hour > 0


def test_cloud_mixed_preset():
    spec = ClusterSpec.preset("cloud-mixed")
    assert spec.num_gpus == 80 and spec.num_nodes == 14 and spec.reference_gpu_type == "H200-141GB"
    assert spec.gpu_types == ("H200-141GB", "L40S-48GB", "A10-24GB")  # largest memory first
    assert [spec.gpus_of_type(t) for t in spec.gpu_types] == [16, 32, 32]
    assert [spec.max_gpus_per_node(t) for t in spec.gpu_types] == [8, 8, 4]
    # no other preset holds any of its types
    others = {t for name in ("frenzy-testbed", "pai-2020", "doubling-64", "large-1024")
              for t in ClusterSpec.preset(name).gpu_types}
    assert not others & set(spec.gpu_types)


@pytest.mark.parametrize("name", ["frenzy-testbed", "pai-2020", "doubling-64", "large-1024", "cloud-mixed"])
def test_presets(name):
    spec = ClusterSpec.preset(name)
    assert spec.num_gpus == int(spec.node_capacity.sum())
    assert spec.reference_gpu_type in spec.gpu_types


def test_preset_shapes():
    assert len(ClusterSpec.preset("frenzy-testbed").gpu_types) == 3
    d = ClusterSpec.preset("doubling-64")
    assert d.num_gpus == 64 and d.num_nodes == 8
    assert ClusterSpec.preset("large-1024").num_gpus >= 1024
    pai = ClusterSpec.preset("pai-2020")
    # proportions kept: V100-32GB (135 machines x 8) has more GPUs than V100-16GB (104 x 8)
    assert pai.gpus_of_type("V100-32GB") > pai.gpus_of_type("V100-16GB")
    assert set(pai.gpu_types) == set(PAI_2020_MACHINES)


def test_unknown_preset_and_empty_cluster():
    with pytest.raises(UnknownNameError, match="cluster preset"):
        ClusterSpec.preset("frenzy-testbd")
    with pytest.raises(ConfigError, match="no nodes"):
        ClusterSpec("empty", ())
    with pytest.raises(ConfigError, match="num_gpus"):
        ClusterSpec.homogeneous("T4-16GB", 2, 0)


def test_gpu_types_sorted_by_memory():
    spec = ClusterSpec.preset("frenzy-testbed")
    mem = [GPU_TYPES[t].memory_bytes for t in spec.gpu_types]
    assert mem == sorted(mem, reverse=True)


def test_state_allocate_release_and_refuse_double_booking():
    spec = ClusterSpec.homogeneous("V100-32GB", 2, 4)
    st = ClusterState(spec)
    idx = st.allocate(7, np.array([3, 0]))
    assert idx.tolist() == [0, 1, 2]
    assert st.free.tolist() == [1, 4]
    with pytest.raises(ValueError, match="already holds"):
        st.allocate(7, np.array([1, 0]))
    with pytest.raises(ValueError, match="cannot allocate 2 GPUs on node 0"):
        st.allocate(8, np.array([2, 0]))
    st.allocate(8, np.array([1, 2]))
    assert st.owner.tolist() == [7, 7, 7, 8, 8, 8, -1, -1]
    st.check()
    assert st.release(7).tolist() == [3, 0]
    assert st.allocation(8).tolist() == [1, 2]
    with pytest.raises(ValueError, match="holds no GPUs"):
        st.release(7)
    st.check()
    assert st.num_free == 5
