"""Hardware profiles: find and load hwprofiles/*.yaml."""
