"""The launcher's OpenSearch cluster: every node's ``opensearch.yml`` names all nodes as
seeds and initial cluster managers, on loopback ports of its own (nothing started)."""

from __future__ import annotations

import shutil

import yaml

from compose.launcher.opensearch_cluster import OpenSearchCluster


def test_each_node_seeds_every_node_on_loopback() -> None:
    cluster = OpenSearchCluster(nodes=2)
    try:
        first, second = (yaml.safe_load(cluster.node_settings(number)) for number in range(2))
        seeds = [f"127.0.0.1:{port}" for port in cluster.transport_ports]
        for number, settings in enumerate((first, second)):
            assert settings["network.host"] == "127.0.0.1"
            assert settings["transport.port"] == cluster.transport_ports[number]
            assert settings["discovery.seed_hosts"] == seeds
            assert settings["cluster.initial_cluster_manager_nodes"] == ["node-1", "node-2"]
            assert "discovery.type" not in settings
        ports = cluster.http_ports + cluster.transport_ports
        assert len(set(ports)) == 4
        assert cluster.urls == [f"http://127.0.0.1:{port}" for port in cluster.http_ports]
    finally:
        shutil.rmtree(cluster.workdir, ignore_errors=True)
