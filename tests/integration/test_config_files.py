"""``--config FILE.toml`` of ``agora-agent`` and the batch and elastic services, as real processes
against a real master: the file's values are used, a flag on the command line wins over the file,
and a file with an unknown key is refused at start with the key named (exit 2)."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import aiohttp

from .agent_process import start_ready, stop_process
from .cluster import running_master


async def _refused(*argv: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        _out, err = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode is not None
    return proc.returncode, err.decode()


async def test_the_agent_reads_its_flags_from_a_config_file(tmp_path: Path) -> None:
    async with running_master(tmp_path / "master") as master:
        conf = tmp_path / "agent.toml"
        conf.write_text(
            "[agent]\n"
            f'master = "127.0.0.1:{master.port}"\n'
            f'work-dir = "{tmp_path / "agent"}"\n'
            'resources = "cpus:3;mem:777;disk:100"\n'
            'attributes = "rack:r7"\n'
            'isolation = "psutil"\n'
            'log-max-size = "1MB"\n'
            "log-max-files = 7\n"
            'gc-delay = "2h"\n'
            "cgroups-enable-cfs = false\n"
            'log-level = "WARNING"\n'
        )
        argv = (sys.executable, "-m", "agent.main", "--config", str(conf), "--log-max-files", "3")
        proc, line = await start_ready(argv, "agora-agent listening on")
        try:
            url = line.rsplit(" ", 1)[-1]
            async with aiohttp.ClientSession() as http:
                async with http.get(url + "/flags") as r:
                    flags = (await r.json())["flags"]
                async with http.get(url + "/state") as r:
                    state = await r.json()
            assert flags["log_max_size"] == str(1 << 20) and flags["gc_delay"] == "7200.0"
            assert flags["log_max_files"] == "3"  # the command line wins over the file's 7
            assert flags["cgroups_enable_cfs"] == "false" and flags["isolation"] == "psutil"
            assert flags["work_dir"] == str(tmp_path / "agent")
            assert state["isolation"] == "psutil"
            assert (state["resources"]["cpus"], state["resources"]["mem"]) == (3.0, 777.0)
            assert state["attributes"] == {"rack": "r7"}
            await master.wait_until(lambda: len(master.state.agents) == 1, 20)
        finally:
            await stop_process(proc, stop_signal=signal.SIGUSR1)
        conf.write_text(conf.read_text().replace("log-max-files = 7", "log-max-flies = 7"))
        code, err = await _refused(sys.executable, "-m", "agent.main", "--config", str(conf))
        assert code == 2 and f"{conf}: unknown key 'log-max-flies'" in err


async def test_the_batch_and_elastic_services_read_their_flags_from_config_files(tmp_path: Path) -> None:
    async with running_master(tmp_path / "master") as master:
        batch = tmp_path / "batch.toml"
        batch.write_text(
            "[batch]\n"
            f'master = "127.0.0.1:{master.port}"\n'
            "port = 0\n"
            f'work-dir = "{tmp_path / "batch"}"\n'
            'name = "batch-from-file"\n'
            'log-tail = "8KB"\n'
            "[accounting]\n"
            "retention_days = 30\n"
        )
        elastic = tmp_path / "elastic.toml"
        elastic.write_text(
            f'master = "127.0.0.1:{master.port}"\n'
            "port = 0\n"
            f'work-dir = "{tmp_path / "elastic"}"\n'
            'name = "elastic-from-file"\n'
            "heartbeat-timeout = 9.5\n"
        )
        started = []
        try:
            for argv, ready in [
                ((sys.executable, "-m", "frameworks.batch", "--config", str(batch)), "batch-from-file listening on"),
                ((sys.executable, "-m", "frameworks.elastic", "--config", str(elastic), "--name", "elastic-flag"),
                 "elastic-flag listening on"),  # the command line wins over the file
            ]:
                proc, line = await start_ready(argv, ready)
                started.append(proc)
                url = line.rsplit(" ", 1)[-1]
                async with aiohttp.ClientSession() as http, http.get(url + "/health") as r:
                    assert r.status == 200
            names = {"batch-from-file", "elastic-flag"}
            await master.wait_until(
                lambda: {f.info.name for f in master.state.frameworks.values()} >= names, 30
            )
            assert (tmp_path / "batch" / "batch" / "jobs.db").exists()
        finally:
            for proc in started:
                await stop_process(proc)
        batch.write_text(batch.read_text().replace("log-tail", "log-tial"))
        code, err = await _refused(sys.executable, "-m", "frameworks.batch", "--config", str(batch))
        assert code == 2 and f"{batch}: unknown key 'log-tial'" in err
        elastic.write_text(elastic.read_text() + "[users]\nx = 1\n")
        code, err = await _refused(sys.executable, "-m", "frameworks.elastic", "--config", str(elastic))
        assert code == 2 and f"{elastic}: unknown key 'users'" in err
