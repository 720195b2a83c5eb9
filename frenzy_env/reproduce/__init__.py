"""The papers' claims re-measured in this world (``frenzy reproduce``)."""
