#!/usr/bin/env python3
"""Checks deploy/ without running it (no container engine or cluster here).

- Every Kubernetes YAML file parses, and every document has apiVersion, kind, metadata.name.
- Every environment variable a manifest or unit sets is one the code reads.
- Every variable the code requires is set for each process: ingress, worker, migration job.
- The container image builds each executable the manifests run, one `swift build
  --product` per command (given several, SwiftPM builds only the last), and copies it.

The code's variables are read from Sources/Shared/Configuration/*.swift: each
`environment.<accessor>("NAME"` is a variable it reads; `required("NAME")` inside
`struct CommonConfiguration` is required by both services, inside
`struct IngressConfiguration` by the ingress only. ADMIN_TOKEN is required where
ADMIN_LISTEN is set. Prints one line per problem and a closing count; exit 1 on problems.
"""
import pathlib
import re
import sys

import yaml

root = pathlib.Path(__file__).resolve().parent.parent
problems = []


def code_variables():
    read, required = set(), {"common": set(), "ingress": set(), "worker": set()}
    for path in sorted((root / "Sources/Shared/Configuration").glob("*.swift")):
        text = path.read_text()
        read |= set(re.findall(r'environment\.[a-zA-Z]+\(\s*"([A-Z][A-Z0-9_]+)"', text))
        for struct, body in re.findall(r"public struct (\w+)[^{]*\{(.*?)(?=\npublic struct |\Z)", text, re.S):
            names = set(re.findall(r'environment\.required\(\s*"([A-Z][A-Z0-9_]+)"\)', body))
            key = {"CommonConfiguration": "common", "IngressConfiguration": "ingress", "WorkerConfiguration": "worker"}.get(struct)
            if key:
                required[key] |= names
    return read, required


def kubernetes():
    documents = []
    # The example Secret is not named *.yaml, so `kubectl apply -f deploy/kubernetes/`
    # cannot overwrite the real one with it; it is checked with the rest.
    paths = [*(root / "deploy/kubernetes").glob("*.yaml"), *(root / "deploy/kubernetes").glob("*.yaml.example")]
    for path in sorted(paths):
        try:
            for document in yaml.safe_load_all(path.read_text()):
                if document is None:
                    continue
                for field in ("apiVersion", "kind"):
                    if field not in document:
                        problems.append(f"{path.name}: a document has no {field}")
                if not (document.get("metadata") or {}).get("name"):
                    problems.append(f"{path.name}: a {document.get('kind')} has no metadata.name")
                documents.append((path.name, document))
        except yaml.YAMLError as error:
            problems.append(f"{path.name}: does not parse: {error}")
    return documents


def container_environment(documents, container_spec):
    """Variables a container gets: env (a secretKeyRef/configMapKeyRef only when that key
    exists), plus every key of the ConfigMaps/Secrets in envFrom."""
    maps = {(d.get("kind"), d["metadata"]["name"]): d for _, d in documents if d.get("metadata")}

    def keys(kind, name):
        document = maps.get((kind, name)) or {}
        return set(document.get("stringData", {})) | set(document.get("data", {}))

    names = set()
    for entry in container_spec.get("env", []):
        source = entry.get("valueFrom") or {}
        dangling = False
        for ref, kind in (("secretKeyRef", "Secret"), ("configMapKeyRef", "ConfigMap")):
            reference = source.get(ref)
            if reference and reference["key"] not in keys(kind, reference["name"]):
                dangling = True
                # Kubernetes will not start a container whose reference names no key,
                # unless the reference is optional.
                if not reference.get("optional"):
                    problems.append(
                        f"{container_spec['name']}: {entry['name']} refers to {kind} "
                        f"{reference['name']} key {reference['key']}, which is not there")
        if not dangling:
            names.add(entry["name"])
    for source in container_spec.get("envFrom", []):
        if "configMapRef" in source:
            names |= set((maps.get(("ConfigMap", source["configMapRef"]["name"])) or {}).get("data", {}))
        if "secretRef" in source:
            secret = maps.get(("Secret", source["secretRef"]["name"])) or {}
            names |= set(secret.get("stringData", {})) | set(secret.get("data", {}))
    return names


def main():
    read, required = code_variables()
    documents = kubernetes()
    # What the manifests set at all.
    for name, document in documents:
        if document.get("kind") in ("ConfigMap", "Secret"):
            for key in list(document.get("data", {})) + list(document.get("stringData", {})):
                if key not in read:
                    problems.append(f"{name}: sets {key}, which the code does not read")
    # What each process gets.
    processes = {"pushgate-ingress": "ingress", "pushgate-worker": "worker", "pushgate-migrate": "migrate"}
    seen = set()
    for name, document in documents:
        if document.get("kind") not in ("Deployment", "Job"):
            continue
        role = processes.get(document["metadata"]["name"])
        if role is None:
            problems.append(f"{name}: unexpected workload {document['metadata']['name']}")
            continue
        seen.add(role)
        for container in document["spec"]["template"]["spec"]["containers"]:
            env = container_environment(documents, container)
            for key in env - read:
                problems.append(f"{name}: {container['name']} sets {key}, which the code does not read")
            needed = {"DATABASE_URL"} if role == "migrate" else required["common"] | required.get(role, set())
            if role == "ingress" and "ADMIN_LISTEN" in env:
                needed = needed | {"ADMIN_TOKEN"}
            for key in sorted(needed - env):
                problems.append(f"{name}: {container['name']} lacks {key}, which the {role} requires")
            if role != "ingress" and "ADMIN_TOKEN" in env:
                problems.append(f"{name}: {container['name']} gets ADMIN_TOKEN, which only the ingress needs")
    for role in processes.values():
        if role not in seen:
            problems.append(f"deploy/kubernetes: no workload runs the {role}")
    # systemd: the example environment file and Environment= lines.
    units = root / "deploy/systemd"
    def keys(file):
        return {line.split("=", 1)[0] for line in (units / file).read_text().splitlines()
                if line and not line.startswith("#")}
    shared_env, ingress_env = keys("pushgate.env.example"), keys("pushgate-ingress.env.example")
    if "ADMIN_TOKEN" in shared_env:
        problems.append("pushgate.env.example: sets ADMIN_TOKEN, which every unit reads and only the ingress needs")
    for key in sorted(ingress_env - {"ADMIN_LISTEN", "ADMIN_TOKEN"}):
        problems.append(f"pushgate-ingress.env.example: sets {key}, which belongs in pushgate.env.example")
    ingress_unit = (units / "pushgate-ingress.service").read_text()
    if not re.search(r"^EnvironmentFile=-?/etc/pushgate/pushgate-ingress.env$", ingress_unit, re.M):
        problems.append("pushgate-ingress.service: does not read pushgate-ingress.env")
    for path in sorted(units.glob("*.service")):
        if path.name != "pushgate-ingress.service" and "pushgate-ingress.env" in path.read_text():
            problems.append(f"{path.name}: reads pushgate-ingress.env, which holds the admin token")
    example = shared_env | ingress_env
    for path in sorted(units.glob("*.service")):
        for key in re.findall(r"^Environment=([A-Z][A-Z0-9_]+)=", path.read_text(), re.M):
            example.add(key)
            if key not in read:
                problems.append(f"{path.name}: sets {key}, which the code does not read")
    for key in sorted(example - read):
        problems.append(f"the systemd environment examples set {key}, which the code does not read")
    for key in sorted((required["common"] | required["ingress"] | {"ADMIN_TOKEN"}) - example):
        problems.append(f"the systemd environment examples lack {key}, which the services require")

    dockerfile()

    for problem in problems:
        print(problem)
    print(f"deploy: {len(documents)} Kubernetes documents, {len(read)} variables the code reads, "
          f"{len(problems)} problems")
    return 1 if problems else 0


def dockerfile():
    text = (root / "deploy/container/Dockerfile").read_text().replace("\\\n", " ")
    built = set()
    for command in re.findall(r"swift build[^&\n]*", text):
        products = re.findall(r"--product\s+(\S+)", command)
        if len(products) > 1:
            problems.append(f"Dockerfile: one swift build names {len(products)} products; only the last is built")
        built |= set(products)
    for product in ("ingress-service", "dispatch-worker", "pushctl"):
        if product not in built:
            problems.append(f"Dockerfile: {product} is not built")
        if not re.search(rf"cp [^\n]*/{product}\b", text):
            problems.append(f"Dockerfile: {product} is not copied out of the build")


if __name__ == "__main__":
    sys.exit(main())
