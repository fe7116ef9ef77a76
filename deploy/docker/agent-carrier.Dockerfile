# sandstream/agent-carrier — the init container of the injection pattern (seeds/000, Smoke 2).
# FROM scratch: no base image can be pulled here, and the carrier needs none — the agent brings
# its own glibc loader and libraries and is started through that loader.
#
# Build context: a directory laid out as
#   sandstream-agent   the single executable (agent/dist/sandstream-agent)
#   lib/               agent/dist/runtime/lib
# scripts/images/agent-carrier.sh stages exactly that and runs `docker build`.
FROM scratch
COPY lib/ /sandstream/lib/
COPY sandstream-agent /sandstream/sandstream-agent
# Same layout as the target volume, so `--inject` finds its libraries next to itself.
ENTRYPOINT ["/sandstream/lib/ld-linux-x86-64.so.2", "--library-path", "/sandstream/lib", "/sandstream/sandstream-agent"]
CMD ["--inject", "/shared"]
