{
  description = "Coffer: custody wallet service (development shell)";

  # No flake.lock yet: the machines this was written on have no Nix to generate one (a lock holds the narHash of
  # the nixpkgs revision, which only Nix computes). The first `nix develop` writes it; commit it so every shell
  # gets the same nixpkgs.
  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable";

  outputs = { self, nixpkgs }:
    let
      # The embedded PostgreSQL binaries pinned in package.json are the linux-x64 build.
      systems = [ "x86_64-linux" ];
      forAll = f: nixpkgs.lib.genAttrs systems (system: f nixpkgs.legacyPackages.${system});
    in
    {
      # Node 24 runs the service and the tests (npm ci also installs the same major as a package, which npm scripts
      # put first on PATH). PostgreSQL here is for the client tools (psql, pg_dump) against the embedded cluster
      # (port and URL in .data/pg-conn.json) or a DATABASE_URL; the service does not need a system server.
      devShells = forAll (pkgs: {
        default = pkgs.mkShell {
          packages = [ pkgs.nodejs_24 pkgs.postgresql ];
        };
      });
    };
}
