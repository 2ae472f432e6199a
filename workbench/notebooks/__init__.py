"""What the notebooks under `notebooks/` share (`support`), their figures (`plots`) and the
runner that executes them (`run`, behind `scripts/notebooks`)."""
