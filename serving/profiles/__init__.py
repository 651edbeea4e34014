"""Engine profiles (TOML). `localfa serve --profile NAME` and `--profile NAME` on other commands."""
