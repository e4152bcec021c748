"""Networks: the registry of networks in the API database and the Neutron slice of routes."""
