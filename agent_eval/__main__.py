"""``python -m agent_eval``: the same command line as the ``agent-eval`` script."""

from agent_eval.cli import main

if __name__ == "__main__":
    main(prog_name="agent-eval")
