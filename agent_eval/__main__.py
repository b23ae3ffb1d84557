"""``python -m agent_eval`` and the ``agent-eval`` script: the command line, with the
collector off while the process starts (``heap.py``)."""

from agent_eval import heap


def main() -> None:
    heap.start_lean()
    from agent_eval.cli import main as cli

    cli(prog_name="agent-eval")


if __name__ == "__main__":
    main()
