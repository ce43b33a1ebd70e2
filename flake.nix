{
  description = "mneme: persistent memory for AI coding agents";

  # Minimal for now: a development shell with the toolchain and the servers the tests need.
  # Packages, images and checks come with the packaging work.
  inputs = {
    nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable";
    flake-utils.url = "github:numtide/flake-utils";
  };

  outputs = { self, nixpkgs, flake-utils }:
    flake-utils.lib.eachDefaultSystem (system:
      let pkgs = import nixpkgs { inherit system; };
      in {
        devShells.default = pkgs.mkShell {
          packages = [
            pkgs.cargo
            pkgs.rustc
            pkgs.clippy
            pkgs.rustfmt
            pkgs.cargo-nextest
            pkgs.nats-server
            pkgs.sqlite
          ];
        };
      });
}
