"""The device-placement environment that GDP, GO and HDP share.

The env, its op features and the partition hint.
"""
