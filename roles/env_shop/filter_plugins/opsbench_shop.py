"""Filters for the env_shop role."""


def opsbench_podman_secret(item, prefix):
    """{key: ENV_NAME, value: secret_file} -> podman's --secret spec exposing it as ENV_NAME."""
    return f"{prefix}-{item['value']},type=env,target={item['key']}"


class FilterModule:
    def filters(self):
        return {"opsbench_podman_secret": opsbench_podman_secret}
