"""The learned systems, one folder each.

A system imports the platform in `learning/`, never another system (GO builds on GDP).
"""
