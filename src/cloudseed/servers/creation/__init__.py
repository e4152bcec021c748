"""Creating servers: from the request the route checked to the rows of each new server."""
