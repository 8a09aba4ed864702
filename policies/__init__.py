"""esi's CrossGuard policy pack, run by ``pulumi preview``/``pulumi up --policy-pack policies/esi-policy-pack``.

``rules`` holds the rules as pure functions over plain manifests (what tests import); ``pack`` turns them
into pulumi_policy policies; ``__main__`` starts the pack (constructing a PolicyPack starts its server).
"""
