"""esi's Python client for scheduler authors: REST for reading and deciding, STOMP for waiting.

``EsiClient`` / ``AsyncEsiClient`` (``esi.client.api_client``) cover every route of the external API and
return the wire models of ``esi.wire.rest``; ``esi.client.subscriber`` subscribes to esi's STOMP topics;
``esi.client.cli`` is the ``esi`` command. Installing ``esi`` without extras brings exactly these.
"""

from esi.client import api_client
from esi.client.api_client import *  # noqa: F403  # its public names are this package's
from esi.client.subscriber import StompError

__all__ = ["StompError"]
__all__ += api_client.__all__
