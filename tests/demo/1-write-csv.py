# Call 1: write a CSV of sales records into the working directory.
import csv, random
random.seed(7)
regions = ["north", "south", "east", "west"]
with open("sales.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["month", "region", "units", "price"])
    for month in range(1, 13):
        for region in regions:
            w.writerow([month, region, random.randint(20, 200), round(random.uniform(5, 15), 2)])
print("wrote sales.csv with", 12 * len(regions), "rows")
