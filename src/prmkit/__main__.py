"""``python -m prmkit`` (what ``accelerate launch -m prmkit train ...`` runs)."""

from prmkit.cli import main

if __name__ == "__main__":
    main()
